/**
 * Preloaded into the functions host by the bench (NODE_OPTIONS=--require): prints the process's
 * own memory figures as a line the bench parses (bench/memory.ts). The host and the app are
 * unchanged; the timer is unref'd so it never keeps the process alive.
 */
const intervalMs = Number(process.env.BENCH_MEMORY_INTERVAL_MS ?? 250);

const timer = setInterval(() => {
  const m = process.memoryUsage();
  const sample = {
    at: Date.now(),
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  };
  process.stdout.write(`BENCH_MEMORY ${JSON.stringify(sample)}\n`);
}, intervalMs);
timer.unref();
