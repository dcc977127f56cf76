import type { StepView } from './api.js';
import { formatTime, html } from './ui.js';

/**
 * An order's steps, one row each: the live order page and a purged order's archived record show
 * the same table. An archived step is the stored JSON of the state, so every field is read as
 * unknown and shown as '–' when it is missing.
 */
export type StepRow = { [K in keyof StepView]?: unknown };

const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '–');
const time = (v: unknown): string => formatTime(typeof v === 'string' ? v : null);

export function StepsTable({ steps }: { steps: readonly StepRow[] }) {
  return html`<table id="steps">
    <thead>
      <tr>
        <th scope="col">Step</th>
        <th scope="col">Status</th>
        <th scope="col" class="num">Attempt</th>
        <th scope="col" class="num">Compensation attempt</th>
        <th scope="col">Complete by</th>
        <th scope="col">Started</th>
        <th scope="col">Completed</th>
        <th scope="col">Compensated</th>
        <th scope="col">Last error</th>
      </tr>
    </thead>
    <tbody>
      ${steps.map(
        (s) =>
          html`<tr>
            <th scope="row">${text(s.name)}</th>
            <td>${text(s.status)}</td>
            <td class="num">${text(s.attempt)}</td>
            <td class="num">${text(s.compensationAttempt)}</td>
            <td>${time(s.completeBy)}</td>
            <td>${time(s.startedAt)}</td>
            <td>${time(s.completedAt)}</td>
            <td>${time(s.compensatedAt)}</td>
            <td>${typeof s.lastError === 'string' ? s.lastError : ''}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}
