import { useState } from 'preact/hooks';
import { request, type HistoryEntry, type HoldView } from './api.js';
import { Confirm, formatTime, html } from './ui.js';

/**
 * An order's legal hold (issue 24) on its page: whether it is held, by whom and why, and Place /
 * Release (POST orders/{id}/hold?reason=, orders/{id}/release). Whether it is held is read from
 * its history, where each hold and release is written in the same transaction as the hold row.
 */
export function holdFromHistory(entries: HistoryEntry[]): HoldView | null {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (e.event === 'LegalHoldReleased') return null;
    if (e.event === 'LegalHoldPlaced') {
      return {
        orderId: '',
        held: true,
        heldAt: e.at,
        ...(e.by ? { heldBy: e.by } : {}),
        // The hold's reason is kept as the history entry's outcome.
        ...(e.outcome ? { reason: e.outcome } : {}),
      };
    }
  }
  return null;
}

export function LegalHoldPanel({
  orderId,
  history,
  onDone,
}: {
  orderId: string;
  history: HistoryEntry[];
  onDone: () => void;
}) {
  const [reason, setReason] = useState('');
  const [asking, setAsking] = useState<'hold' | 'release' | null>(null);
  const [outcome, setOutcome] = useState('');
  const hold = holdFromHistory(history);

  const act = async (action: 'hold' | 'release') => {
    setAsking(null);
    const label = action === 'hold' ? 'Hold' : 'Release';
    try {
      const { status, body } = await request<HoldView & { detail?: string; title?: string }>(
        `orders/${orderId}/${action}`,
        {
          method: 'POST',
          query: action === 'hold' ? { reason: reason.trim() } : {},
          accept: [404, 409],
        },
      );
      setOutcome(
        status === 200
          ? body.held
            ? `${label}: the order is held; retention skips it.`
            : `${label}: the order is no longer held; retention applies again.`
          : `${label} refused (${status}): ${body.detail ?? body.title ?? ''}`,
      );
      if (status === 200) setReason('');
      onDone();
    } catch (e) {
      setOutcome(`${label} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  return html`<section id="legal-hold" aria-labelledby="legal-hold-title" class="legal-hold">
    <h2 id="legal-hold-title">Legal hold</h2>
    <p id="hold-status">
      ${
        hold
          ? `Held by ${hold.heldBy ?? 'an operator'} since ${formatTime(hold.heldAt)}${hold.reason ? `: ${hold.reason}` : ''}. Retention never archives or purges it while held.`
          : 'Not held: retention archives and purges the order once it is terminal and past the retention period.'
      }
    </p>
    ${
      hold
        ? html`<button type="button" onClick=${() => setAsking('release')}>Release legal hold</button>`
        : html`<form
            onSubmit=${(e: Event) => {
              e.preventDefault();
              setAsking('hold');
            }}
          >
            <label for="hold-reason">Reason for the hold (kept with it)</label>
            <input
              id="hold-reason"
              value=${reason}
              maxlength="500"
              onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)}
            />
            <button type="submit">Place legal hold</button>
          </form>`
    }
    <p id="hold-outcome" role="status">${outcome}</p>
    ${
      asking
        ? html`<${Confirm}
          title=${asking === 'hold' ? `Hold order ${orderId.slice(0, 8)}?` : `Release order ${orderId.slice(0, 8)}?`}
          confirmLabel=${asking === 'hold' ? 'Hold this order' : 'Release this order'}
          onConfirm=${() => act(asking)}
          onCancel=${() => setAsking(null)}
        >
          <p>
            ${
              asking === 'hold'
                ? 'Retention will skip this order until the hold is released. Recorded in its history with your name.'
                : 'Retention applies to this order again: once terminal and past the retention period it is archived and purged. Recorded in its history with your name.'
            }
          </p>
        </${Confirm}>`
        : null
    }
  </section>`;
}
