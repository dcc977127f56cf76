// Bundles the operator console (console/src) into dist/console/app.js and app.css, which the
// function app serves at /api/console/assets/ (shared/http/consoleApi.ts). Type-checking is
// tsc's job (tsconfig.console.json); esbuild only bundles and minifies.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const outdir = 'dist/console';
await build({
  entryPoints: { app: 'console/src/main.ts' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome111', 'firefox111', 'safari16.4'],
  outdir,
  legalComments: 'eof',
  logLevel: 'warning',
});
const sizes = ['app.js', 'app.css'].map((f) => {
  const body = readFileSync(`${outdir}/${f}`);
  return `${f} ${(body.length / 1024).toFixed(1)} KiB (${(gzipSync(body).length / 1024).toFixed(1)} KiB gzip)`;
});
console.log(`console: ${sizes.join(', ')}`);
