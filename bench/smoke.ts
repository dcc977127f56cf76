import { startBenchStack } from './benchStack.js';
import { measureScenario, measureSubmission, measureIdle } from './cost.js';

async function main() {
  const bench = await startBenchStack({ STEP_TIMEOUT_SECONDS: '3', SUPERVISOR_SCHEDULE: '*/1 * * * * *', EXTENDED_BACKOFF_SECONDS: '2' });
  try {
    console.log(JSON.stringify(await measureScenario(bench, 'success', 2), null, 1));
    console.log(JSON.stringify(await measureSubmission(bench, 2)));
    console.log(JSON.stringify(await measureIdle(bench, 5000, 3600, { schedule: '*/30', sweepsPerHour: 120 }), null, 1));
    console.log(JSON.stringify(await measureScenario(bench, 'retried', 1), null, 1));
    console.log(JSON.stringify(await measureScenario(bench, 'compensated', 1), null, 1));
  } finally {
    await bench.stop();
  }
}
void main().catch((e) => { console.error(e); process.exit(1); });
