import { get, type Change, type ChangesPage } from './api.js';

/**
 * Live updates at O(changes): one GET /api/orders/changes?after={cursor} every few seconds, which
 * reads only what changed since the cursor; each screen patches the rows the changes name and
 * re-reads nothing else. The first call (without `after`) only fetches the current cursor.
 */

export type LiveStatus = 'connecting' | 'live' | 'paused' | 'offline';
type Listener = (changes: Change[]) => void;

const intervalMs = 2000;

export class ChangeFeed {
  private cursor: string | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly listeners = new Set<Listener>();
  private readonly statusListeners = new Set<(status: LiveStatus) => void>();
  status: LiveStatus = 'connecting';
  private stopped = false;

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onStatus(listener: (status: LiveStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  start(): void {
    this.stopped = false;
    void this.poll();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private setStatus(status: LiveStatus): void {
    if (status === this.status) return;
    this.status = status;
    for (const l of this.statusListeners) l(status);
  }

  private async poll(): Promise<void> {
    if (this.stopped) return;
    // A hidden tab asks nothing; it catches up from its cursor when shown again.
    if (document.hidden) {
      this.setStatus('paused');
      this.timer = setTimeout(() => void this.poll(), intervalMs);
      return;
    }
    let delay = intervalMs;
    try {
      const page = await get<ChangesPage>('orders/changes', { after: this.cursor });
      const first = this.cursor === undefined;
      this.cursor = page.cursor;
      this.setStatus('live');
      if (!first && page.changes.length > 0) for (const l of this.listeners) l(page.changes);
    } catch {
      this.setStatus('offline');
      delay = intervalMs * 3;
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.poll(), delay);
  }
}

export const feed = new ChangeFeed();
