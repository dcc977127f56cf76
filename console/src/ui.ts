import { h, type ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function formatSeconds(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function StateBadge({ state }: { state: string }) {
  return html`<span class=${`badge state-${state}`}>${state}</span>`;
}

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error instanceof Error ? error.message : String(error)}</p>`;
}

export interface ConfirmProps {
  title: string;
  confirmLabel: string;
  children?: ComponentChildren;
  onConfirm: () => void;
  onCancel: () => void;
}

/**
 * Every action asks first, in a modal <dialog>: the browser keeps focus inside it, Escape
 * cancels, and the confirming button is named after what it does.
 */
export function Confirm({ title, confirmLabel, children, onConfirm, onCancel }: ConfirmProps) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return html`<dialog ref=${ref} aria-labelledby="confirm-title" onCancel=${onCancel}>
    <form
      method="dialog"
      onSubmit=${(e: Event) => {
        e.preventDefault();
        onConfirm();
      }}
    >
      <h2 id="confirm-title">${title}</h2>
      <div class="confirm-body">${children}</div>
      <div class="buttons">
        <button type="button" onClick=${onCancel}>Back</button>
        <button type="submit" class="danger">${confirmLabel}</button>
      </div>
    </form>
  </dialog>`;
}
