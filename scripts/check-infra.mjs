// `npm run check:infra`: the real Bicep compiler on the deployment templates.
// Restores the pinned Bicep CLI from NuGet (needs the .NET SDK), then for each template runs
// `bicep build` and `bicep lint` and fails on any error or warning, checks that the lint config
// silences nothing, and checks infra/main.parameters.json against the compiled template.
//
// Usage: node scripts/check-infra.mjs [--root <dir>]
//   --root  check the infra/ of another copy of the repository (default: this one); the
//           Bicep CLI still comes from this repository's tools/bicep.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { restoreBicep, runBicep } from './infra/bicep-cli.mjs';
import { checkLintConfig } from './infra/lint-config.mjs';
import { checkParameters } from './infra/parameters.mjs';
import { formatFinding, isBlocking, readSarif } from './infra/sarif.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const TEMPLATES = ['infra/main.bicep', 'infra/conformance/main.bicep'];
const PARAMETER_FILES = [{ template: 'infra/main.bicep', parameters: 'infra/main.parameters.json' }];
const LINT_CONFIGS = [
  'bicepconfig.json',
  'infra/bicepconfig.json',
  'infra/app/bicepconfig.json',
  'infra/conformance/bicepconfig.json',
];

// A resource property the type does not know: the compiler must report it as BCP037, or this
// check could no longer see the warnings it exists for (a new CLI, a changed output format).
const CANARY = `resource canary 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: 'canary'
  location: 'westeurope'
  properties: {
    notAPropertyOfThisType: true
  }
}
`;

function rootFromArgs(argv) {
  const at = argv.indexOf('--root');
  if (at === -1) return repo;
  if (!argv[at + 1]) throw new Error('--root needs a directory');
  return resolve(argv[at + 1]);
}

/** Runs one bicep command with SARIF diagnostics and returns the findings. */
function diagnose(bicep, args) {
  const run = runBicep(bicep, [...args, '--diagnostics-format', 'sarif']);
  // `build --outfile` prints SARIF on stderr, `lint` on stdout.
  const sarif = [run.stderr, run.stdout].find((s) => s.trim().startsWith('{'));
  const findings = sarif ? readSarif(sarif) : [];
  if (!sarif && (run.status !== 0 || run.stderr.trim())) {
    throw new Error(
      `bicep ${args.join(' ')} exited ${run.status} without a SARIF log:\n${run.stdout}${run.stderr}`,
    );
  }
  if (run.status !== 0 && !findings.some(isBlocking)) {
    throw new Error(
      `bicep ${args.join(' ')} exited ${run.status} but reported no error:\n${run.stdout}${run.stderr}`,
    );
  }
  return findings;
}

function main() {
  const root = rootFromArgs(process.argv.slice(2));
  const started = Date.now();
  const { bicep, version } = restoreBicep(repo);
  console.log(`Bicep CLI ${version} (${bicep})`);
  const out = mkdtempSync(join(tmpdir(), 'check-infra-'));
  const failures = [];
  try {
    mkdirSync(join(out, 'canary'));
    writeFileSync(join(out, 'canary', 'canary.bicep'), CANARY);
    const canary = diagnose(bicep, [
      'build',
      join(out, 'canary', 'canary.bicep'),
      '--outfile',
      join(out, 'canary.json'),
    ]);
    if (!canary.some((f) => f.rule === 'BCP037' && isBlocking(f))) {
      failures.push(
        `the canary with an unknown property was not reported as BCP037 (got ${JSON.stringify(canary)})`,
      );
    } else {
      console.log('ok   canary: an unknown resource property is reported (BCP037)');
    }

    for (const config of LINT_CONFIGS) {
      const path = join(root, config);
      if (!existsSync(path)) continue;
      const problems = checkLintConfig(JSON.parse(readFileSync(path, 'utf8')));
      failures.push(...problems.map((p) => `${config}: ${p}`));
      if (problems.length === 0) console.log(`ok   ${config} silences no rule`);
    }

    const compiled = new Map();
    for (const template of TEMPLATES) {
      const outfile = join(out, template.replace(/[/\\]/g, '_').replace(/\.bicep$/, '.json'));
      for (const [step, args] of [
        ['build', ['build', join(root, template), '--outfile', outfile]],
        ['lint', ['lint', join(root, template)]],
      ]) {
        const blocking = diagnose(bicep, args).filter(isBlocking);
        failures.push(...blocking.map((f) => `bicep ${step} ${template}: ${formatFinding(f, root)}`));
        console.log(
          `${blocking.length ? 'FAIL' : 'ok  '} bicep ${step} ${template}: ${blocking.length} errors/warnings`,
        );
      }
      if (existsSync(outfile)) compiled.set(template, JSON.parse(readFileSync(outfile, 'utf8')));
    }

    for (const { template, parameters } of PARAMETER_FILES) {
      const arm = compiled.get(template);
      if (!arm) {
        failures.push(`${parameters}: not checked, ${template} did not compile`);
        continue;
      }
      const problems = checkParameters(arm, JSON.parse(readFileSync(join(root, parameters), 'utf8')));
      failures.push(...problems.map((p) => `${parameters}: ${p}`));
      console.log(
        `${problems.length ? 'FAIL' : 'ok  '} ${parameters} against ${template}: ${problems.length} problems`,
      );
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }

  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (failures.length) {
    console.error(`\ncheck:infra failed (${failures.length}), ${seconds} s:`);
    for (const f of failures) console.error(`  ${f}`);
    process.exit(1);
  }
  console.log(`check:infra passed: ${TEMPLATES.length} templates, 0 errors, 0 warnings, ${seconds} s`);
}

try {
  main();
} catch (err) {
  console.error(`check:infra could not run: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(2);
}
