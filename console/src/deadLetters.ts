import { useEffect, useState } from 'preact/hooks';
import { get, request, type DeadLetter, type DeadLetterCount, type DeadLetterResults } from './api.js';
import { Confirm, ErrorNote, formatTime, html } from './ui.js';

type Action = 'redrive' | 'discard';

export function DeadLetters({ query }: { query: URLSearchParams }) {
  const entity = query.get('entity');
  const [counts, setCounts] = useState<DeadLetterCount[] | null>(null);
  const [messages, setMessages] = useState<DeadLetter[] | null>(null);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [asking, setAsking] = useState<Action | null>(null);
  const [results, setResults] = useState<DeadLetterResults | null>(null);
  const [error, setError] = useState<unknown>(null);

  const load = () => {
    get<{ entities: DeadLetterCount[] }>('deadletters')
      .then((d) => setCounts(d.entities))
      .catch(setError);
    if (entity) {
      get<{ messages: DeadLetter[] }>('deadletters/messages', { entity, top: 50 })
        .then((d) => setMessages(d.messages))
        .catch(setError);
    }
  };

  useEffect(() => {
    setMessages(null);
    setSelected(new Set());
    setResults(null);
    load();
  }, [entity]);

  const toggle = (seq: string) =>
    setSelected((old) => {
      const next = new Set(old);
      if (next.has(seq)) next.delete(seq);
      else next.add(seq);
      return next;
    });

  const act = async (action: Action) => {
    setAsking(null);
    try {
      const answer = await request<DeadLetterResults>(`deadletters/${action}`, {
        method: 'POST',
        json: { entity, sequenceNumbers: [...selected] },
      });
      setResults(answer.body);
      setSelected(new Set());
      load();
    } catch (e) {
      setError(e);
    }
  };

  return html`<section aria-labelledby="dlq-page-title">
    <h1 id="dlq-page-title">Dead letters</h1>
    <${ErrorNote} error=${error} />
    ${
      counts
        ? html`<table id="dead-letter-entities">
            <caption>
              Dead-lettered messages per queue and subscription
            </caption>
            <thead>
              <tr>
                <th scope="col">Queue or subscription</th>
                <th scope="col" class="num">Messages</th>
              </tr>
            </thead>
            <tbody>
              ${counts.map(
                (c) =>
                  html`<tr aria-current=${c.entity === entity ? 'true' : undefined}>
                    <th scope="row">
                      <a href=${`#/deadletters?entity=${encodeURIComponent(c.entity)}`}>${c.entity}</a>
                    </th>
                    <td class="num">${c.count}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : html`<p>Loading…</p>`
    }
    ${
      entity
        ? html`<h2>${entity}</h2>
            ${
              messages
                ? messages.length === 0
                  ? html`<p>No dead-lettered message.</p>`
                  : html`<table id="dead-letter-messages">
                        <thead>
                          <tr>
                            <th scope="col">Select</th>
                            <th scope="col">Sequence</th>
                            <th scope="col">Reason</th>
                            <th scope="col">Description</th>
                            <th scope="col" class="num">Deliveries</th>
                            <th scope="col">Enqueued</th>
                            <th scope="col">Order</th>
                            <th scope="col">Body</th>
                          </tr>
                        </thead>
                        <tbody>
                          ${messages.map(
                            (m) =>
                              html`<tr data-sequence=${m.sequenceNumber} data-order-id=${m.orderId ?? ''}>
                                <td>
                                  <input
                                    type="checkbox"
                                    id=${`dl-${m.sequenceNumber}`}
                                    aria-label=${`Select message ${m.sequenceNumber}`}
                                    checked=${selected.has(m.sequenceNumber)}
                                    onChange=${() => toggle(m.sequenceNumber)}
                                  />
                                </td>
                                <td>${m.sequenceNumber}</td>
                                <td>${m.reason}</td>
                                <td>${m.description}</td>
                                <td class="num">${m.deliveryCount}</td>
                                <td>${formatTime(m.enqueuedAt)}</td>
                                <td>
                                  ${m.orderId ? html`<a href=${`#/orders/${m.orderId}`}><code>${m.orderId.slice(0, 8)}</code></a>` : '–'}
                                </td>
                                <td>
                                  <details>
                                    <summary>Body</summary>
                                    <pre>${JSON.stringify(m.body, null, 2)}</pre>
                                  </details>
                                </td>
                              </tr>`,
                          )}
                        </tbody>
                      </table>
                      <div class="actions" role="group" aria-label="Dead-letter actions">
                        <button
                          type="button"
                          disabled=${selected.size === 0}
                          onClick=${() => setAsking('redrive')}
                        >
                          Redrive selected (${selected.size})
                        </button>
                        <button
                          type="button"
                          class="danger"
                          disabled=${selected.size === 0}
                          onClick=${() => setAsking('discard')}
                        >
                          Discard selected (${selected.size})
                        </button>
                      </div>`
                : html`<p>Loading…</p>`
            }`
        : html`<p>Choose a queue or subscription to see its dead-lettered messages.</p>`
    }
    ${
      results
        ? html`<ul id="dead-letter-results" role="status">
            ${results.results.map(
              (r) =>
                html`<li>
                  Message ${r.sequenceNumber}: ${r.status}${r.newMessageId ? ` as ${r.newMessageId}` : ''}
                </li>`,
            )}
          </ul>`
        : null
    }
    ${
      asking
        ? html`<${Confirm}
          title=${`${asking === 'redrive' ? 'Redrive' : 'Discard'} ${selected.size} messages?`}
          confirmLabel=${`${asking === 'redrive' ? 'Redrive' : 'Discard'} ${selected.size} messages`}
          onConfirm=${() => act(asking)}
          onCancel=${() => setAsking(null)}
        >
          <p>
            ${
              asking === 'redrive'
                ? 'A copy of each message, with a new message id, goes back to its queue (a subscription’s to its topic); the dead letter is removed and the order’s history records it.'
                : 'Each message is removed for good; the order’s history records it.'
            }
          </p>
        </${Confirm}>`
        : null
    }
  </section>`;
}
