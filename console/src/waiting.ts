import { useState } from 'preact/hooks';
import { request, type OrderView } from './api.js';
import { formatTime, html } from './ui.js';

/**
 * The step an order waits on (issue 25): a callback (with the service's reference) or an
 * operator's approval, with Approve / Refuse and a reason (POST orders/{id}/approval).
 */
export function WaitingPanel({ order, onDone }: { order: OrderView; onDone: () => void }) {
  const [reason, setReason] = useState('');
  const [outcome, setOutcome] = useState('');
  const step =
    order.processState === 'Processing'
      ? order.steps.find((s) => s.status === 'Running' && s.waitingSince)
      : undefined;
  // The decision's answer outlives the wait it ended: the page re-reads the order right after it.
  if (!step) return outcome ? html`<p id="approval-outcome" role="status">Approval ${outcome}</p>` : null;
  // An approval waits from its dispatch and has no service reference.
  const approval = !step.reference && step.startedAt === step.waitingSince;
  const decide = async (decision: 'approve' | 'refuse') => {
    try {
      const { status, body } = await request<{ processState?: string; detail?: string }>(
        `orders/${order.orderId}/approval`,
        { method: 'POST', json: { decision, reason: reason.trim() }, accept: [400, 409] },
      );
      setOutcome(
        status === 202
          ? `${decision}d: the order is ${body.processState}.`
          : `not recorded, refused (${status}): ${body.detail ?? ''}`,
      );
      onDone();
    } catch (e) {
      setOutcome(`not recorded, failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return html`<section id="waiting" aria-labelledby="waiting-title" class="waiting">
    <h2 id="waiting-title">Waiting: ${step.name}</h2>
    <p>
      ${`${approval ? 'For an operator to approve or refuse' : 'For the service to call back'} since ${formatTime(step.waitingSince)}; complete-by ${formatTime(step.completeBy)}`}${
        step.reference ? html`; reference <code>${step.reference}</code>` : null
      }.
    </p>
    ${
      approval
        ? html`<form onSubmit=${(e: Event) => e.preventDefault()}>
            <label for="approval-reason">Reason (recorded with your name)</label>
            <input
              id="approval-reason"
              value=${reason}
              maxlength="500"
              onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)}
            />
            <button type="button" disabled=${!reason.trim()} onClick=${() => decide('approve')}>
              Approve
            </button>
            <button type="button" disabled=${!reason.trim()} onClick=${() => decide('refuse')}>Refuse</button>
          </form>`
        : null
    }
    <p id="approval-outcome" role="status">${outcome ? `Approval ${outcome}` : ''}</p>
  </section>`;
}
