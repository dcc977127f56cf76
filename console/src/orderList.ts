import { useEffect, useState } from 'preact/hooks';
import {
  get,
  processStates,
  type Change,
  type OrderPage,
  type OrderSummary,
  type ProcessState,
} from './api.js';
import { feed } from './live.js';
import { ErrorNote, formatTime, html, StateBadge } from './ui.js';

export interface ListFilter {
  state: ProcessState;
  workflowVersion?: string;
  customerId?: string;
  from?: string;
  to?: string;
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** datetime-local (the operator's time zone) to ISO, as the API takes it. */
export function toIso(local: string | undefined): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export function filterFromQuery(params: URLSearchParams): ListFilter {
  const raw = params.get('state') ?? 'Error';
  const state = processStates.find((s) => s.toLowerCase() === raw.toLowerCase()) ?? 'Error';
  return {
    state,
    workflowVersion: params.get('workflowVersion') ?? undefined,
    customerId: params.get('customerId') ?? undefined,
    from: params.get('from') ?? undefined,
    to: params.get('to') ?? undefined,
  };
}

export function filterToQuery(f: ListFilter): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, String(v));
  return q.toString();
}

/** The filter fields, shared by the list and the bulk screen. */
export function FilterFields({
  filter,
  onChange,
}: {
  filter: ListFilter;
  onChange: (f: ListFilter) => void;
}) {
  const set = (field: keyof ListFilter) => (e: Event) =>
    onChange({ ...filter, [field]: (e.target as HTMLInputElement).value || undefined });
  return html`<div class="fields">
    <div class="field">
      <label for="field-state">State</label>
      <select id="field-state" name="state" value=${filter.state} onChange=${set('state')}>
        ${processStates.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="field-workflowVersion">Workflow version</label>
      <input
        id="field-workflowVersion"
        name="workflowVersion"
        type="number"
        min="1"
        step="1"
        value=${filter.workflowVersion ?? ''}
        onInput=${set('workflowVersion')}
      />
    </div>
    <div class="field">
      <label for="field-customerId">Customer</label>
      <input
        id="field-customerId"
        name="customerId"
        type="text"
        value=${filter.customerId ?? ''}
        onInput=${set('customerId')}
      />
    </div>
    <div class="field">
      <label for="field-from">Entered its state from</label>
      <input
        id="field-from"
        name="from"
        type="datetime-local"
        value=${filter.from ?? ''}
        onInput=${set('from')}
      />
    </div>
    <div class="field">
      <label for="field-to">Entered its state by</label>
      <input id="field-to" name="to" type="datetime-local" value=${filter.to ?? ''} onInput=${set('to')} />
    </div>
  </div>`;
}

export function listQuery(f: ListFilter) {
  return {
    state: f.state,
    workflowVersion: f.workflowVersion,
    customerId: f.customerId,
    from: toIso(f.from),
    to: toIso(f.to),
  };
}

export function OrderList({ query }: { query: URLSearchParams }) {
  const applied = filterFromQuery(query);
  const [draft, setDraft] = useState<ListFilter>(applied);
  const [rows, setRows] = useState<OrderSummary[]>([]);
  const [token, setToken] = useState<string | undefined>();
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(null);
  const [search, setSearch] = useState('');
  const [searchError, setSearchError] = useState('');
  const key = filterToQuery(applied);

  const load = async (continuationToken?: string) => {
    setLoading(true);
    setError(null);
    try {
      const page = await get<OrderPage>('orders', { ...listQuery(applied), pageSize: 50, continuationToken });
      setRows((old) => (continuationToken ? [...old, ...page.orders] : page.orders));
      setToken(page.continuationToken);
    } catch (e) {
      setError(e);
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    setDraft(applied);
    void load();
  }, [key]);

  // Patch the rows the changes name; an order that left the filtered state stays, marked, until
  // the next reload, so the operator sees where it went.
  useEffect(
    () =>
      feed.subscribe((changes: Change[]) => {
        const byId = new Map(changes.map((c) => [c.orderId, c]));
        setRows((old) => {
          const known = new Set(old.map((r) => r.orderId));
          const patched = old.map((r) => {
            const c = byId.get(r.orderId);
            return c ? { ...r, processState: c.processState, updatedAt: c.updatedAt } : r;
          });
          const arrived = changes
            .filter((c) => c.processState === applied.state && !known.has(c.orderId))
            .map((c) => ({ ...c, failureCount: 0, error: null, arrived: true }) as OrderSummary);
          return [...arrived, ...patched];
        });
      }),
    [key],
  );

  const onSearch = (e: Event) => {
    e.preventDefault();
    const id = search.trim().toLowerCase();
    if (!uuid.test(id)) {
      setSearchError('An order id is a UUID such as 3f2b8c1e-5d4a-4b6c-9e7f-0a1b2c3d4e5f.');
      return;
    }
    setSearchError('');
    window.location.hash = `#/orders/${id}`;
  };

  return html`<section aria-labelledby="orders-title">
    <h1 id="orders-title">Orders</h1>
    <form class="search" role="search" onSubmit=${onSearch}>
      <div class="field">
        <label for="field-orderId">Order id</label>
        <input
          id="field-orderId"
          name="orderId"
          type="search"
          value=${search}
          onInput=${(e: Event) => setSearch((e.target as HTMLInputElement).value)}
          aria-describedby="search-error"
        />
      </div>
      <button type="submit">Open order</button>
      <span id="search-error" class="error" role="alert">${searchError}</span>
    </form>
    <form
      class="filters"
      aria-label="Filter orders"
      onSubmit=${(e: Event) => {
        e.preventDefault();
        window.location.hash = `#/orders?${filterToQuery(draft)}`;
      }}
    >
      <${FilterFields} filter=${draft} onChange=${setDraft} />
      <button type="submit">Apply filter</button>
    </form>
    <${ErrorNote} error=${error} />
    <table id="order-list" aria-busy=${loading}>
      <caption>
        ${applied.state} orders${loading ? ' (loading…)' : ''}
      </caption>
      <thead>
        <tr>
          <th scope="col">Order</th>
          <th scope="col">State</th>
          <th scope="col">Workflow</th>
          <th scope="col">Customer</th>
          <th scope="col">Created</th>
          <th scope="col">Updated</th>
          <th scope="col" class="num">Failures</th>
          <th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        ${rows.map(
          (o) =>
            html`<tr data-order-id=${o.orderId} class=${o.processState !== applied.state ? 'moved' : ''}>
              <td>
                <a href=${`#/orders/${o.orderId}`}><code>${o.orderId}</code></a>
              </td>
              <td><${StateBadge} state=${o.processState} /></td>
              <td>${o.workflow ?? ''}${o.workflowVersion ? ` v${o.workflowVersion}` : ''}</td>
              <td>${o.customerId ?? ''}</td>
              <td>${formatTime(o.createdAt)}</td>
              <td>${formatTime(o.updatedAt)}</td>
              <td class="num">${o.failureCount}</td>
              <td>${o.error?.code ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${!loading && rows.length === 0 ? html`<p>No order matches.</p>` : null}
    ${token ? html`<button type="button" onClick=${() => load(token)}>Load more</button>` : null}
  </section>`;
}
