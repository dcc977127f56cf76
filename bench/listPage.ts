import { startAzurite } from '../local/azurite.js';
import { measureListScaling } from './listScaling.js';

/**
 * `npm run bench:list [-- --quick]`: the list-page part of `npm run bench` alone (its own Azurite):
 * entities read per page with 100 and with 100,000 terminal orders (10,000 with --quick).
 */
async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const azurite = await startAzurite({ services: ['table'] });
  try {
    const r = await measureListScaling(azurite.connectionString, {
      small: 100,
      large: quick ? 10_000 : 100_000,
    });
    console.log(JSON.stringify(r, null, 2));
  } finally {
    await azurite.stop();
  }
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
