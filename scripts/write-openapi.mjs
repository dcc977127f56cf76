// Writes the OpenAPI document the app serves at GET /api/openapi.json to a file, for the linter.
// Usage: node scripts/write-openapi.mjs <out.json>. Needs dist/shared/http/openapi.js: `npm run
// lint` compiles just that module's graph first (tsconfig.openapi.json), so it works before a build.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/write-openapi.mjs <out.json>');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { openApiDocument } = require(resolve('dist/shared/http/openapi.js'));
mkdirSync(dirname(resolve(out)), { recursive: true });
writeFileSync(out, `${JSON.stringify(openApiDocument(), null, 2)}\n`);
console.log(`wrote ${out}`);
