import { useEffect, useState } from 'preact/hooks';
import { get, type RetentionReadout } from './api.js';
import { ErrorNote, formatTime, html, StateBadge } from './ui.js';

/**
 * Retention at a glance (issue 24): the policy, the oldest retained order, how many are past
 * retention and wait for the purge, the last purge slice, and the orders under a legal hold
 * (GET orders/retention, a few range reads). Read when the screen opens and on Refresh: the purge
 * runs with the Supervisor, not with each order's change.
 */
const days = (n: number) => (n === 0 ? 'kept forever (0)' : `${n} days`);

export function RetentionScreen() {
  const [data, setData] = useState<RetentionReadout | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);

  const load = () => {
    setLoading(true);
    get<RetentionReadout>('orders/retention')
      .then((d) => {
        setData(d);
        setError(null);
      })
      .catch(setError)
      .finally(() => setLoading(false));
  };
  useEffect(load, []);

  const last = data?.lastPurge;
  return html`<section aria-labelledby="retention-title">
    <h1 id="retention-title">Retention</h1>
    <${ErrorNote} error=${error} />
    <button type="button" onClick=${load} disabled=${loading}>Refresh</button>
    ${
      data
        ? html`<div class="cards">
              <section class="card" aria-labelledby="policy-title">
                <h2 id="policy-title">Policy</h2>
                <dl class="facts" id="retention-policy">
                  <dt>Terminal orders</dt>
                  <dd>${days(data.orderRetentionDays)}</dd>
                  <dt>Idempotency tombstones</dt>
                  <dd>${days(data.idempotencyRetentionDays)}</dd>
                  <dt>Archive</dt>
                  <dd>
                    ${data.archive ? 'on: purged orders are archived first' : 'off (ORDER_ARCHIVE=off)'}
                  </dd>
                </dl>
              </section>
              <section class="card" aria-labelledby="oldest-title">
                <h2 id="oldest-title">Oldest retained order</h2>
                <div id="oldest-retained">
                  ${
                    data.oldestRetained
                      ? html`<p>
                            <a href=${`#/orders/${data.oldestRetained.orderId}`}
                              >${data.oldestRetained.orderId}</a
                            >
                            <${StateBadge} state=${data.oldestRetained.processState} />
                          </p>
                          <p>terminal since ${formatTime(data.oldestRetained.since)}</p>`
                      : html`<p>No terminal order is kept.</p>`
                  }
                </div>
              </section>
              <section class="card" aria-labelledby="waiting-purge-title">
                <h2 id="waiting-purge-title">Past retention, waiting</h2>
                <p class="big" id="past-retention">
                  ${data.pastRetentionWaiting}${data.waitingCapped ? '+' : ''}
                </p>
                <p>
                  ${
                    data.orderRetentionDays === 0
                      ? 'Retention is off: nothing expires.'
                      : data.pastRetentionWaiting === 0
                        ? 'Nothing waits for the purge.'
                        : 'Orders older than the policy that the purge has not reached yet.'
                  }
                </p>
              </section>
              <section class="card" aria-labelledby="last-purge-title">
                <h2 id="last-purge-title">Last purge</h2>
                <dl class="facts" id="last-purge">
                  <dt>Last run</dt>
                  <dd>${last?.lastRunAt ? formatTime(last.lastRunAt) : 'never'}</dd>
                  <dt>Purged in it</dt>
                  <dd>${last?.lastPurged ?? '–'}</dd>
                  <dt>Last order purged</dt>
                  <dd>${last?.lastPurgedAt ? formatTime(last.lastPurgedAt) : 'never'}</dd>
                  ${
                    last?.lastError
                      ? html`<dt>Error</dt>
                          <dd class="error">${last.lastError}</dd>`
                      : null
                  }
                </dl>
              </section>
            </div>
            <h2 id="held-title">Held orders</h2>
            ${
              data.held.length === 0
                ? html`<p id="held-none">No order is under a legal hold.</p>`
                : html`<table id="held-orders" aria-labelledby="held-title">
                    <thead>
                      <tr>
                        <th scope="col">Order</th>
                        <th scope="col">Held by</th>
                        <th scope="col">Since</th>
                        <th scope="col">Reason</th>
                      </tr>
                    </thead>
                    <tbody>
                      ${data.held.map(
                        (h) =>
                          html`<tr data-order-id=${h.orderId}>
                            <th scope="row">
                              <a href=${`#/orders/${h.orderId}`}><code>${h.orderId}</code></a>
                            </th>
                            <td>${h.heldBy}</td>
                            <td>${formatTime(h.heldAt)}</td>
                            <td>${h.reason ?? ''}</td>
                          </tr>`,
                      )}
                    </tbody>
                  </table>`
            }
            <p class="as-of">
              Held orders are released from their order's page. Up to 100 are listed; past-retention orders
              are counted up to 10,000.
            </p>`
        : error
          ? null
          : html`<p>Loading…</p>`
    }
  </section>`;
}
