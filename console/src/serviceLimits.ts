import { useEffect, useState } from 'preact/hooks';
import { get, type ServiceLimit, type ServiceLimits } from './api.js';
import { ErrorNote, formatSeconds, formatTime, html } from './ui.js';

/**
 * The remote services' call limits (issue 26): per service the limit in force, the rate it allows
 * now, the calls started, the requests waiting for a call slot and the oldest of them, the pauses
 * on 429/503 and the outage tracking (GET services/limits). Nothing here changes with orders, so
 * it is read again every lease period while the screen is open and the tab visible, not from the
 * change feed: two table reads per service each time.
 */
const minRefreshMs = 2_000;
const maxRefreshMs = 10_000;

const perSecond = (v: number | null) => (v === null ? 'no limit' : `${v}/s`);
const atOnce = (v: number | null) => (v === null ? 'no limit' : `${v} at once`);

function Limit({ s }: { s: ServiceLimit }) {
  const { maxCallsPerSecond, maxConcurrentCalls } = s.limits;
  if (maxCallsPerSecond === null && maxConcurrentCalls === null) return html`<span>none</span>`;
  return html`<span>${perSecond(maxCallsPerSecond)}, ${atOnce(maxConcurrentCalls)}</span>`;
}

function RateInForce({ s }: { s: ServiceLimit }) {
  if (s.rateInForce === null) return html`<span>–</span>`;
  return html`<span
    >${s.rateInForce}/s${s.rateFactor < 1 && !s.pausedUntil ? ` (${Math.round(s.rateFactor * 100)}% after 429s)` : ''}</span
  >`;
}

function Oldest({ s }: { s: ServiceLimit }) {
  const o = s.oldestWaiting;
  if (!o) return html`<span>–</span>`;
  return html`<span>
    ${o.orderId ? html`<a href=${`#/orders/${o.orderId}`}>${o.orderId.slice(0, 8)}</a>` : null}
    ${`${o.orderId ? ', ' : ''}waiting ${formatSeconds(o.ageSeconds)}`}
  </span>`;
}

function Pauses({ s }: { s: ServiceLimit }) {
  return html`<span>
    ${s.pauses}${s.pausedUntil ? html`; <strong class="paused">paused until ${formatTime(s.pausedUntil)}</strong>` : null}
    ${s.lastRefusalAt ? html`<br /><small>last 429/503 ${formatTime(s.lastRefusalAt)}</small>` : null}
  </span>`;
}

function Outage({ s }: { s: ServiceLimit }) {
  const o = s.outage;
  if (o.open) {
    return html`<span class="error">
      open since ${formatTime(o.since)}${o.lastStatus !== null ? ` (last ${o.lastStatus})` : ''}
    </span>`;
  }
  return html`<span
    >${o.consecutiveFailures > 0 ? `${o.consecutiveFailures} failures in a row` : 'none'}</span
  >`;
}

export function ServiceLimitsScreen() {
  const [data, setData] = useState<ServiceLimits | null>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const load = async () => {
      let next = maxRefreshMs;
      if (!document.hidden) {
        try {
          const d = await get<ServiceLimits>('services/limits');
          setData(d);
          setError(null);
          next = Math.min(maxRefreshMs, Math.max(minRefreshMs, d.leaseSeconds * 1000));
        } catch (e) {
          setError(e);
        }
      }
      if (!stopped) timer = setTimeout(() => void load(), next);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  const waiting = data?.services.reduce((a, s) => a + s.waiting, 0) ?? 0;
  return html`<section aria-labelledby="services-title">
    <h1 id="services-title">Service limits</h1>
    <p>
      What each remote service allows across every instance together, and what waits for it. A request waiting
      for a call slot is waiting, not failing: it keeps its place and spends no failure budget.
    </p>
    <${ErrorNote} error=${error} />
    ${
      data
        ? html`<table id="service-limits">
              <caption>
                ${waiting === 0 ? 'No request waits for a call slot.' : `${waiting} requests wait for a call slot.`}
              </caption>
              <thead>
                <tr>
                  <th scope="col">Service</th>
                  <th scope="col">Limit</th>
                  <th scope="col" class="num">Rate in force</th>
                  <th scope="col" class="num">Current rate</th>
                  <th scope="col" class="num">Instances</th>
                  <th scope="col" class="num">Calls waiting</th>
                  <th scope="col">Oldest waiting order</th>
                  <th scope="col">Pauses from 429/503</th>
                  <th scope="col">Outage</th>
                </tr>
              </thead>
              <tbody>
                ${data.services.map(
                  (s) =>
                    html`<tr data-service=${s.service}>
                      <th scope="row">${s.service}</th>
                      <td data-col="limit"><${Limit} s=${s} /></td>
                      <td data-col="rate-in-force" class="num"><${RateInForce} s=${s} /></td>
                      <td data-col="current-rate" class="num">${s.currentRate}/s</td>
                      <td data-col="instances" class="num">${s.instances}</td>
                      <td data-col="waiting" class="num">${s.waiting}</td>
                      <td data-col="oldest"><${Oldest} s=${s} /></td>
                      <td data-col="pauses"><${Pauses} s=${s} /></td>
                      <td data-col="outage"><${Outage} s=${s} /></td>
                    </tr>`,
                )}
              </tbody>
            </table>
            <p class="as-of">
              As of ${formatTime(data.asOf)}; the instances report every ${data.leaseSeconds} s, and this
              screen reads again as often.
            </p>`
        : error
          ? null
          : html`<p>Loading…</p>`
    }
  </section>`;
}
