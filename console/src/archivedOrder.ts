import type { ComponentChildren } from 'preact';
import type { ArchivedOrderView } from './api.js';
import { StepsTable, type StepRow } from './stepsTable.js';
import { formatTime, html, StateBadge } from './ui.js';

/**
 * A purged order's page (issue 24): GET console/orders/{id} answers its archive document (the
 * order, its final state with its steps, its whole history) instead of the live view. Read-only:
 * a purged order can be neither acted on nor held. `children` is the history's timeline.
 */
const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '–');

export function isArchived(view: unknown): view is ArchivedOrderView {
  return typeof view === 'object' && view !== null && (view as { archived?: unknown }).archived === true;
}

export function ArchivedOrder({ view, children }: { view: ArchivedOrderView; children?: ComponentChildren }) {
  const state = view.state;
  const steps = Array.isArray(state.steps) ? (state.steps as StepRow[]) : [];
  return html`<section id="archived-order" aria-labelledby="archived-title">
    <h2 id="archived-title">Archived: purged on ${formatTime(view.purgedAt)}</h2>
    <p>
      The order finished and was purged under the retention policy; this is its archived record
      (<code>${view.archive}</code>). It can no longer be acted on or held.
    </p>
    <dl class="facts">
      <dt>State</dt>
      <dd id="order-state"><${StateBadge} state=${text(state.processState)} /></dd>
      <dt>Run</dt>
      <dd>${text(state.run)}</dd>
      <dt>Customer</dt>
      <dd>${text(view.order.customerId)}</dd>
      <dt>Terminal since</dt>
      <dd>${formatTime(typeof state.stateSince === 'string' ? state.stateSince : null)}</dd>
    </dl>
    <h2>Steps</h2>
    <${StepsTable} steps=${steps} />
    <h2>History</h2>
    ${children}
  </section>`;
}
