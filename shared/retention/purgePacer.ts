import { defaultPurgePacing, nextPurgeStep, type PurgePacing } from '../domain/purgePacing.js';
import type { LiveWork } from './liveWork.js';

/**
 * The purge's gate before each order (domain/purgePacing.ts decides): one per process, so the
 * minimum share holds across slices too. Without a live-work signal it never waits.
 */
export class PurgePacer {
  private lastOrderMs: number | undefined;
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

  /** Waits for the purge's turn; false when the slice should stop (its budget ends first). */
  async next(deadlineMs: number): Promise<boolean> {
    for (;;) {
      const nowMs = Date.now();
      const step = nextPurgeStep(
        { nowMs, liveWork: await this.liveNow(), lastOrderMs: this.lastOrderMs, deadlineMs },
        this.pacing,
      );
      if (step.kind === 'stop') return false;
      if (step.kind === 'go') {
        this.lastOrderMs = Date.now();
        return true;
      }
      await new Promise((r) => setTimeout(r, step.ms));
      this.paused += Date.now() - nowMs;
    }
  }

  takePaused(): number {
    const ms = this.paused;
    this.paused = 0;
    return ms;
  }
}
