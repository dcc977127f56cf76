import { useState } from 'preact/hooks';
import { request, type BulkAction, type BulkFilter, type BulkPreview, type BulkResults } from './api.js';
import { FilterFields, listQuery, type ListFilter } from './orderList.js';
import { Confirm, ErrorNote, formatTime, html } from './ui.js';

const labels: Record<BulkAction, string> = { resubmit: 'Resubmit', cancel: 'Cancel', retry: 'Retry now' };

/** Built in code, not in the template: htm drops a space that a line break stands for. */
function resultsTitle(r: BulkResults): string {
  const accepted = r.results.filter((x) => x.status === 202).length;
  return `${labels[r.action]}: ${accepted} of ${r.results.length} accepted`;
}

/**
 * Bulk actions in the contract's two steps: a preview (what matches, nothing changes, a token
 * bound to action, filter and limit) and the confirmed run, which answers per order.
 */
export function Bulk() {
  const [action, setAction] = useState<BulkAction>('resubmit');
  const [filter, setFilter] = useState<ListFilter>({ state: 'Error' });
  const [limit, setLimit] = useState('100');
  const [preview, setPreview] = useState<BulkPreview | null>(null);
  const [asking, setAsking] = useState(false);
  const [results, setResults] = useState<BulkResults | null>(null);
  const [error, setError] = useState<unknown>(null);

  const body = () => {
    const q = listQuery(filter);
    const f: BulkFilter = { state: filter.state };
    if (q.workflowVersion) f.workflowVersion = Number(q.workflowVersion);
    if (q.customerId) f.customerId = q.customerId;
    if (q.from) f.from = q.from;
    if (q.to) f.to = q.to;
    return { filter: f, limit: Number(limit) };
  };

  const onPreview = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setResults(null);
    setPreview(null);
    try {
      setPreview(
        (await request<BulkPreview>(`orders/bulk/${action}`, { method: 'POST', json: body() })).body,
      );
    } catch (err) {
      setError(err);
    }
  };

  const onConfirm = async () => {
    setAsking(false);
    if (!preview) return;
    try {
      const answer = await request<BulkResults>(`orders/bulk/${action}`, {
        method: 'POST',
        json: { ...body(), confirm: preview.confirm },
      });
      setResults(answer.body);
      setPreview(null);
    } catch (err) {
      setError(err);
    }
  };

  const changed = () => {
    setPreview(null);
    setResults(null);
  };

  return html`<section aria-labelledby="bulk-title">
    <h1 id="bulk-title">Bulk actions</h1>
    <p>
      Pick an action and a filter, preview what matches, then confirm. Nothing changes until you confirm; the
      preview expires after 5 minutes.
    </p>
    <form class="filters" aria-label="Bulk action" onSubmit=${onPreview}>
      <div class="fields">
        <div class="field">
          <label for="field-action">Action</label>
          <select
            id="field-action"
            name="action"
            value=${action}
            onChange=${(e: Event) => {
              setAction((e.target as HTMLSelectElement).value as BulkAction);
              changed();
            }}
          >
            ${(Object.keys(labels) as BulkAction[]).map((a) => html`<option value=${a}>${labels[a]}</option>`)}
          </select>
        </div>
        <div class="field">
          <label for="field-limit">At most</label>
          <input
            id="field-limit"
            name="limit"
            type="number"
            min="1"
            max="500"
            value=${limit}
            onInput=${(e: Event) => {
              setLimit((e.target as HTMLInputElement).value);
              changed();
            }}
          />
        </div>
      </div>
      <${FilterFields}
        filter=${filter}
        onChange=${(f: ListFilter) => {
          setFilter(f);
          changed();
        }}
      />
      <button type="submit">Preview</button>
    </form>
    <${ErrorNote} error=${error} />
    ${
      preview
        ? html`<section id="bulk-preview" aria-labelledby="preview-title">
            <h2 id="preview-title">${preview.matched} orders match</h2>
            ${
              preview.orderIds.length
                ? html`<p>The first ${preview.orderIds.length}:</p>
                    <ul class="ids">
                      ${preview.orderIds.map(
                        (id) =>
                          html`<li>
                            <a href=${`#/orders/${id}`}><code>${id}</code></a>
                          </li>`,
                      )}
                    </ul>`
                : null
            }
            <p>This preview expires at ${formatTime(preview.expiresAt)}.</p>
            <button
              type="button"
              class="danger"
              disabled=${preview.matched === 0}
              onClick=${() => setAsking(true)}
            >
              ${labels[preview.action]} ${preview.matched} orders…
            </button>
          </section>`
        : null
    }
    ${
      results
        ? html`<section id="bulk-results" aria-labelledby="results-title">
            <h2 id="results-title">${resultsTitle(results)}</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Order</th>
                  <th scope="col">Answer</th>
                  <th scope="col">Detail</th>
                </tr>
              </thead>
              <tbody>
                ${results.results.map(
                  (r) =>
                    html`<tr data-order-id=${r.orderId}>
                      <td>
                        <a href=${`#/orders/${r.orderId}`}><code>${r.orderId}</code></a>
                      </td>
                      <td>${r.status}</td>
                      <td>${r.detail ?? ''}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </section>`
        : null
    }
    ${
      asking && preview
        ? html`<${Confirm}
          title=${`${labels[preview.action]} ${preview.matched} orders?`}
          confirmLabel=${`${labels[preview.action]} ${preview.matched} orders`}
          onConfirm=${onConfirm}
          onCancel=${() => setAsking(false)}
        >
          <p>Every ${filter.state} order the filter matched (at most ${limit}) is acted on, at a bounded rate; each one answers separately.</p>
        </${Confirm}>`
        : null
    }
  </section>`;
}
