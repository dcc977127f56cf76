/** The one source of time: adapters get it injected, tests drive a ManualClock. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export class ManualClock implements Clock {
  private current: number;

  constructor(start: Date | string = '2030-01-01T00:00:00.000Z') {
    this.current = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.current);
  }

  advanceSeconds(seconds: number): Date {
    this.current += seconds * 1000;
    return this.now();
  }

  advanceMs(ms: number): Date {
    this.current += ms;
    return this.now();
  }

  set(at: Date | string): void {
    this.current = new Date(at).getTime();
  }
}

export function addSeconds(at: Date, seconds: number): Date {
  return new Date(at.getTime() + seconds * 1000);
}
