/**
 * Preloaded into a chaos host with NODE_OPTIONS="--require <this file>": shifts the process's
 * wall clock by CHAOS_CLOCK_SKEW_MS, so one host believes it is a few seconds ahead (or behind)
 * of the others. Only the chaos runner sets these variables; the app has no clock-offset hook
 * and none is added for this (the app's systemClock reads `new Date()`, which this shifts).
 */
const skew = Number(process.env.CHAOS_CLOCK_SKEW_MS ?? 0);

if (Number.isFinite(skew) && skew !== 0) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(realNow() + skew);
      else super(...(args as [string | number | Date]));
    }
    static now(): number {
      return realNow() + skew;
    }
  }
  (globalThis as { Date: DateConstructor }).Date = SkewedDate as unknown as DateConstructor;
}
