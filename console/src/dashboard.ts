import { useEffect, useState } from 'preact/hooks';
import {
  get,
  processStates,
  terminalStates,
  type Change,
  type Counts,
  type DeadLetterCount,
  type OrderPage,
  type ProcessState,
} from './api.js';
import { LineChart } from './chart.js';
import { feed } from './live.js';
import { ErrorNote, formatSeconds, formatTime, html } from './ui.js';

/**
 * Orders reaching a terminal state per minute over the last hour: seeded from the list (orders
 * created in the last hour, per terminal state, at most `seedPages` pages each), then kept
 * current from the change feed. A terminal order is counted once, at its last update.
 */
const minutes = 60;
const seedPages = 5;

interface Buckets {
  start: number; // epoch seconds of the first minute
  finished: Map<string, { state: ProcessState; minute: number }>;
}

function minuteOf(iso: string): number {
  return Math.floor(new Date(iso).getTime() / 60_000) * 60;
}

function record(b: Buckets, orderId: string, state: ProcessState, updatedAt: string): void {
  if (!terminalStates.includes(state)) {
    b.finished.delete(orderId); // resubmitted: it will finish again
    return;
  }
  b.finished.set(orderId, { state, minute: minuteOf(updatedAt) });
}

function series(b: Buckets) {
  const now = Math.floor(Date.now() / 60_000) * 60;
  const x: number[] = [];
  for (let t = now - (minutes - 1) * 60; t <= now; t += 60) x.push(t);
  const done = x.map(() => 0);
  const failed = x.map(() => 0);
  for (const { state, minute } of b.finished.values()) {
    const i = (minute - x[0]!) / 60;
    if (i < 0 || i >= x.length) continue;
    done[i]! += 1;
    if (state !== 'Processed') failed[i]! += 1;
  }
  const rate = done.map((d, i) => (d === 0 ? null : Math.round((failed[i]! / d) * 1000) / 10));
  return { x, done, failed, rate };
}

async function seed(b: Buckets): Promise<void> {
  const from = new Date(Date.now() - minutes * 60_000).toISOString();
  await Promise.all(
    terminalStates.map(async (state) => {
      let token: string | undefined;
      for (let page = 0; page < seedPages; page++) {
        const p = await get<OrderPage>('orders', { state, from, pageSize: 100, continuationToken: token });
        for (const o of p.orders) record(b, o.orderId, o.processState, o.updatedAt);
        token = p.continuationToken;
        if (!token) break;
      }
    }),
  );
}

/** Built in code, not in the template: htm drops a space that a line break stands for. */
function oldestLine(oldest: NonNullable<Counts['oldestInFlight']>) {
  const age = `, ${formatSeconds(oldest.ageSeconds)} of its ${formatSeconds(oldest.boundSeconds)} bound`;
  return ['Oldest: ', html`<a href=${`#/orders/${oldest.orderId}`}>${oldest.orderId.slice(0, 8)}</a>`, age];
}

export function Dashboard() {
  const [counts, setCounts] = useState<Counts | null>(null);
  const [deadLetters, setDeadLetters] = useState<DeadLetterCount[] | null>(null);
  const [buckets] = useState<Buckets>(() => ({ start: 0, finished: new Map() }));
  const [, setTick] = useState(0);
  const [error, setError] = useState<unknown>(null);
  const [seeded, setSeeded] = useState(false);

  const loadCounts = () => get<Counts>('orders/counts').then(setCounts).catch(setError);
  const loadDeadLetters = () =>
    get<{ entities: DeadLetterCount[] }>('deadletters')
      .then((d) => setDeadLetters(d.entities))
      .catch(setError);

  useEffect(() => {
    void loadCounts();
    void loadDeadLetters();
    seed(buckets)
      .then(() => setSeeded(true))
      .catch(setError);
    const unsubscribe = feed.subscribe((changes: Change[]) => {
      for (const c of changes) record(buckets, c.orderId, c.processState, c.updatedAt);
      setTick((t) => t + 1);
      // One counts read per batch of changes, not per order; dead letters change without orders.
      void loadCounts();
      void loadDeadLetters();
    });
    return unsubscribe;
  }, []);

  const s = series(buckets);
  const total = s.done.reduce((a, v) => a + v, 0);
  const failedTotal = s.failed.reduce((a, v) => a + v, 0);
  const oldest = counts?.oldestInFlight;
  return html`<section aria-labelledby="dashboard-title">
    <h1 id="dashboard-title">Dashboard</h1>
    <${ErrorNote} error=${error} />
    <div class="cards">
      <section class="card" aria-labelledby="states-title">
        <h2 id="states-title">Orders per state</h2>
        ${
          counts
            ? html`<table class="counts" id="state-counts">
                  <thead>
                    <tr>
                      <th scope="col">State</th>
                      <th scope="col" class="num">Orders</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${processStates.map(
                      (state) =>
                        html`<tr data-state=${state}>
                          <th scope="row"><a href=${`#/orders?state=${state}`}>${state}</a></th>
                          <td class="num">${counts.counts[state] ?? 0}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
                <p class="as-of">As of ${formatTime(counts.asOf)}</p>`
            : html`<p>Loading…</p>`
        }
      </section>
      <section class="card" aria-labelledby="flight-title">
        <h2 id="flight-title">In flight</h2>
        ${
          counts
            ? html`<p class="big" id="in-flight">${counts.inFlight}</p>
                ${
                  oldest
                    ? html`<p id="oldest-in-flight">${oldestLine(oldest)}</p>
                        <label for="oldest-meter">Oldest in-flight age against its bound</label>
                        <meter
                          id="oldest-meter"
                          min="0"
                          max=${oldest.boundSeconds}
                          high=${oldest.boundSeconds * 0.8}
                          value=${Math.min(oldest.ageSeconds, oldest.boundSeconds)}
                        ></meter>
                        ${
                          oldest.ageSeconds > oldest.boundSeconds
                            ? html`<p class="error">Past its bound: the Supervisor should have acted.</p>`
                            : null
                        }`
                    : html`<p>
                        ${counts.inFlight === 0 ? 'Nothing in flight.' : 'The oldest is not known yet.'}
                      </p>`
                }`
            : html`<p>Loading…</p>`
        }
      </section>
      <section class="card" aria-labelledby="dlq-title">
        <h2 id="dlq-title">Dead letters</h2>
        ${
          deadLetters
            ? html`<table id="dead-letter-counts">
                <thead>
                  <tr>
                    <th scope="col">Queue or subscription</th>
                    <th scope="col" class="num">Messages</th>
                  </tr>
                </thead>
                <tbody>
                  ${deadLetters.map(
                    (d) =>
                      html`<tr>
                        <th scope="row">
                          <a href=${`#/deadletters?entity=${encodeURIComponent(d.entity)}`}>${d.entity}</a>
                        </th>
                        <td class="num">${d.count}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : html`<p>Loading…</p>`
        }
      </section>
    </div>
    <div class="charts">
      <${LineChart}
        id="throughput"
        title="Finished orders per minute, last hour"
        summary=${seeded ? `${total} orders finished in the last hour, ${failedTotal} of them in Error or Compensated.` : 'Reading the last hour…'}
        unit="orders/min"
        x=${s.x}
        series=${[
          { label: 'Finished', values: s.done, stroke: '#2563eb' },
          { label: 'Failed', values: s.failed, stroke: '#dc2626' },
        ]}
      />
      <${LineChart}
        id="failure-rate"
        title="Failure rate per minute, last hour"
        summary=${!seeded ? 'Reading the last hour…' : total ? `${Math.round((failedTotal / total) * 1000) / 10}% of finished orders failed in the last hour.` : 'No order finished in the last hour.'}
        unit="% failed"
        x=${s.x}
        series=${[{ label: 'Failed %', values: s.rate, stroke: '#dc2626' }]}
      />
    </div>
  </section>`;
}
