import { defaultPurgePacing, nextPurgeStep, type PurgePacing } from '../domain/purgePacing.js';
import type { LiveWork } from './liveWork.js';

/**
 * The purge's gate before each piece of work (domain/purgePacing.ts decides): one per process, so
 * its share holds across slices too. Without a live-work signal it never waits.
 */
export class PurgePacer {
  private last: { startMs: number; endMs: number } | undefined;
  private startedMs: number | undefined;
  /** Time spent paused for live work since the last `takePaused`. */
  private paused = 0;

  constructor(
    private readonly live: LiveWork | undefined,
    readonly pacing: PurgePacing = defaultPurgePacing,
  ) {}

  /** Whether live work runs now (a slice judges fewer orders then). */
  async liveNow(): Promise<boolean> {
    return this.live ? this.live.busy() : false;
  }

  /**
   * Waits for the purge's turn; false when the slice should stop (its budget ends first). With
   * `holdToDeadline` (a slice's first piece) it waits out the budget instead of returning at once,
   * so a caller looping over slices does not spin.
   */
  async next(deadlineMs: number, holdToDeadline = false): Promise<boolean> {
    for (;;) {
      const nowMs = Date.now();
      const step = nextPurgeStep(
        { nowMs, liveWork: await this.liveNow(), last: this.last, deadlineMs },
        this.pacing,
      );
      if (step.kind === 'go') {
        this.startedMs = Date.now();
        return true;
      }
      if (step.kind === 'stop' && (!holdToDeadline || nowMs >= deadlineMs)) return false;
      const ms = step.kind === 'pause' ? step.ms : Math.min(this.pacing.pollMs, deadlineMs - nowMs);
      await new Promise((r) => setTimeout(r, ms));
      this.paused += Date.now() - nowMs;
    }
  }

  /** The piece `next` let start is done: its time sets the next pause while live work waits. */
  done(): void {
    if (this.startedMs !== undefined) this.last = { startMs: this.startedMs, endMs: Date.now() };
    this.startedMs = undefined;
  }

  takePaused(): number {
    const ms = this.paused;
    this.paused = 0;
    return ms;
  }
}
