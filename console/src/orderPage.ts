import { useEffect, useState } from 'preact/hooks';
import { get, request, type Change, type HistoryEntry, type HistoryPage, type OrderView } from './api.js';
import { feed } from './live.js';
import { Confirm, ErrorNote, formatTime, html, StateBadge } from './ui.js';
import { WaitingPanel } from './waiting.js';
import { LegalHoldPanel } from './legalHold.js';
import { ArchivedOrder, isArchived } from './archivedOrder.js';
import { StepsTable } from './stepsTable.js';

type Action = 'resubmit' | 'cancel' | 'retry';

const actions: Record<Action, { label: string; explain: string; allowed: (o: OrderView) => boolean }> = {
  resubmit: {
    label: 'Resubmit',
    explain:
      'The order goes back to Pending and runs again from the step that failed. Do this after fixing the cause.',
    allowed: (o) => o.processState === 'Error',
  },
  retry: {
    label: 'Retry now',
    explain: 'The waiting step is sent again now instead of after its back-off.',
    allowed: (o) => o.processState === 'Pending',
  },
  cancel: {
    label: 'Cancel',
    explain: 'The steps that completed are compensated in reverse order; the order ends Compensated.',
    // The API's rule (OperatorCancel in shared/domain/transition.ts): an Error order is resubmitted, not cancelled.
    allowed: (o) => o.processState === 'Pending' || o.processState === 'Processing',
  },
};

/** All pages of the order's history, oldest first. */
async function loadHistory(orderId: string): Promise<HistoryEntry[]> {
  const entries: HistoryEntry[] = [];
  let token: string | undefined;
  do {
    const page = await get<HistoryPage>(`orders/${orderId}/history`, {
      pageSize: 100,
      continuationToken: token,
    });
    entries.push(...page.entries);
    token = page.continuationToken;
  } while (token);
  return entries;
}

function entryKind(e: HistoryEntry): string {
  if (e.actor === 'operator') return 'operator';
  if (/compensat/i.test(e.event)) return 'compensation';
  if (e.error || /fail|error|timeout|gaveup|giveup/i.test(e.event)) return 'failure';
  return 'normal';
}

function Timeline({ entries }: { entries: HistoryEntry[] }) {
  return html`<ol class="timeline" id="timeline">
    ${entries.map(
      (e) =>
        html`<li class=${`entry ${entryKind(e)}`} data-event=${e.event}>
          <time datetime=${e.at}>${formatTime(e.at)}</time>
          <span class="event">${e.event}</span>
          <span class="actor">${e.actor}${e.by ? ` (${e.by})` : ''}</span>
          ${e.step ? html`<span class="step">step ${e.step}${e.attempt ? `, attempt ${e.attempt}` : ''}</span>` : null}
          ${e.run ? html`<span class="run">run ${e.run}</span>` : null}
          ${e.workflowVersion ? html`<span class="version">${e.workflow ?? 'workflow'} v${e.workflowVersion}</span>` : null}
          ${e.outcome ? html`<span class="outcome">→ ${e.outcome}</span>` : null}
          ${
            e.traceId
              ? html`<span class="trace" title="W3C trace id: operation_Id in Application Insights"
                  >trace <code>${e.traceId}</code></span
                >`
              : null
          }
          ${e.error ? html`<pre class="entry-error">${e.error}</pre>` : null}
        </li>`,
    )}
  </ol>`;
}

export function OrderPage({ orderId }: { orderId: string }) {
  const [order, setOrder] = useState<OrderView | null>(null);
  const [history, setHistory] = useState<HistoryEntry[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [historyError, setHistoryError] = useState<unknown>(null);
  const [asking, setAsking] = useState<Action | null>(null);
  const [outcome, setOutcome] = useState<string>('');

  const load = () => {
    get<OrderView>(`console/orders/${orderId}`)
      .then((o) => {
        setOrder(o);
        setError(null);
      })
      .catch(setError);
    loadHistory(orderId)
      .then((h) => {
        setHistory(h);
        setHistoryError(null);
      })
      .catch(setHistoryError);
  };

  useEffect(() => {
    setOrder(null);
    setHistory(null);
    setOutcome('');
    load();
    // Only a change to this order re-reads it.
    return feed.subscribe((changes: Change[]) => {
      if (changes.some((c) => c.orderId === orderId)) load();
    });
  }, [orderId]);

  const act = async (action: Action) => {
    setAsking(null);
    try {
      const { status, body } = await request<{ processState?: string; detail?: string; title?: string }>(
        `orders/${orderId}/${action}`,
        { method: 'POST', accept: [409, 404] },
      );
      setOutcome(
        status === 202
          ? `${actions[action].label}: accepted, the order is ${body.processState}.`
          : `${actions[action].label} refused (${status}): ${body.detail ?? body.title ?? ''}`,
      );
      load();
    } catch (e) {
      setOutcome(`${actions[action].label} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // A purged order answers its archive document: read-only, with its archived history.
  if (isArchived(order)) {
    return html`<section aria-labelledby="order-title">
      <h1 id="order-title">Order <code>${orderId}</code></h1>
      <${ArchivedOrder} view=${order}>
        <${Timeline} entries=${order.history as unknown as HistoryEntry[]} />
      </${ArchivedOrder}>
    </section>`;
  }

  return html`<section aria-labelledby="order-title">
    <h1 id="order-title">Order <code>${orderId}</code></h1>
    <${ErrorNote} error=${error} />
    ${
      order
        ? html`<dl class="facts" id="order-facts">
              <dt>State</dt>
              <dd id="order-state"><${StateBadge} state=${order.processState} /></dd>
              <dt>Run</dt>
              <dd>${order.run}</dd>
              <dt>Failures</dt>
              <dd>${order.failureCount}</dd>
              <dt>Complete by</dt>
              <dd>${formatTime(order.completeBy)}</dd>
              <dt>Customer</dt>
              <dd>${order.customerId ?? '–'}</dd>
              <dt>Created</dt>
              <dd>${formatTime(order.createdAt)}</dd>
              <dt>Updated</dt>
              <dd>${formatTime(order.updatedAt)}</dd>
              ${
                order.compensationReason
                  ? html`<dt>Compensation</dt>
                      <dd>${order.compensationReason}</dd>`
                  : null
              }
              ${
                order.error
                  ? html`<dt>Error</dt>
                      <dd class="error">
                        ${order.error.code}${order.error.detail ? `: ${order.error.detail}` : ''}
                      </dd>`
                  : null
              }
            </dl>
            <div class="actions" role="group" aria-label="Actions">
              ${(Object.keys(actions) as Action[]).map(
                (a) =>
                  html`<button
                    type="button"
                    disabled=${!actions[a].allowed(order)}
                    onClick=${() => setAsking(a)}
                  >
                    ${actions[a].label}
                  </button>`,
              )}
            </div>
            <p id="action-outcome" role="status">${outcome}</p>
            <${WaitingPanel} order=${order} onDone=${load} />
            ${history ? html`<${LegalHoldPanel} orderId=${orderId} history=${history} onDone=${load} />` : null}
            <h2>Steps</h2>
            <${StepsTable} steps=${order.steps} />`
        : error
          ? null
          : html`<p>Loading…</p>`
    }
    <h2>History</h2>
    <${ErrorNote} error=${historyError} />
    ${history ? html`<${Timeline} entries=${history} />` : historyError ? null : html`<p>Loading…</p>`}
    ${
      asking && order
        ? html`<${Confirm}
          title=${`${actions[asking].label} order ${orderId.slice(0, 8)}?`}
          confirmLabel=${`${actions[asking].label} this order`}
          onConfirm=${() => act(asking)}
          onCancel=${() => setAsking(null)}
        >
          <p>${actions[asking].explain}</p>
        </${Confirm}>`
        : null
    }
  </section>`;
}
