/**
 * The logic of `npm run check:infra` (scripts/infra/*.mjs) on small fixtures: reading the Bicep
 * CLI's SARIF, refusing a lint config that silences rules, and checking a parameters file
 * against a compiled template. The compiler itself runs only in `npm run check:infra` (it needs
 * the .NET SDK to restore); the SARIF fixtures below are trimmed from what Bicep 0.49.2 printed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// Compiled to dist/test/infra; the scripts live at the repository root.
const root = resolve(__dirname, '..', '..', '..');

type Finding = { level: string; rule: string; message: string; file: string; line: number; column: number };
type Json = Record<string, unknown>;

async function load<T>(path: string): Promise<T> {
  return (await import(pathToFileURL(join(root, path)).href)) as T;
}

const sarif = () =>
  load<{
    readSarif(text: string): Finding[];
    isBlocking(f: Finding): boolean;
    formatFinding(f: Finding, root: string): string;
  }>('scripts/infra/sarif.mjs');
const parameters = () =>
  load<{ checkParameters(template: Json, file: Json): string[] }>('scripts/infra/parameters.mjs');
const lintConfig = () =>
  load<{ checkLintConfig(config: unknown): string[] }>('scripts/infra/lint-config.mjs');
const bicepCli = () => load<{ pinnedVersion(project: string): string }>('scripts/infra/bicep-cli.mjs');

const sarifLog = (results: unknown[]) =>
  JSON.stringify({ version: '2.1.0', runs: [{ tool: { driver: { name: 'bicep' } }, results }] });

// `bicep build` of a namespace with a misspelled property: a warning, exit code 0.
const unknownProperty = {
  ruleId: 'BCP037',
  message: {
    text: 'The property "localAuthDisabled" is not allowed on objects of type "SBNamespaceProperties".',
  },
  locations: [
    {
      physicalLocation: {
        artifactLocation: { uri: 'file:///repo/infra/app/servicebus.bicep' },
        region: { startLine: 22, charOffset: 5 },
      },
    },
  ],
};

test('SARIF: a result without a level is a warning, and warnings block like errors', async () => {
  const { readSarif, isBlocking, formatFinding } = await sarif();
  const findings = readSarif(
    sarifLog([
      unknownProperty,
      { ruleId: 'BCP009', level: 'error', message: { text: 'Expected a literal value.' } },
      { ruleId: 'info-rule', level: 'note', message: { text: 'for information' } },
    ]),
  );
  assert.deepEqual(
    findings.map((f) => [f.rule, f.level, isBlocking(f)]),
    [
      ['BCP037', 'warning', true],
      ['BCP009', 'error', true],
      ['info-rule', 'note', false],
    ],
  );
  assert.equal(findings[0].file, '/repo/infra/app/servicebus.bicep');
  assert.equal(
    formatFinding(findings[0], '/repo'),
    'infra/app/servicebus.bicep(22,5) warning BCP037: The property "localAuthDisabled" is not allowed on objects of type "SBNamespaceProperties".',
  );
  assert.deepEqual(readSarif(sarifLog([])), []);
});

test('SARIF: text that is not a SARIF log is refused, not read as "no findings"', async () => {
  const { readSarif } = await sarif();
  assert.throws(() => readSarif('main.bicep(1,1) : Warning BCP037: ...'), /did not print a SARIF log/);
  assert.throws(() => readSarif('{"version":"2.1.0"}'), /not a SARIF log/);
});

test('lint config: rules may be raised, never turned off or down to info', async () => {
  const { checkLintConfig } = await lintConfig();
  assert.deepEqual(checkLintConfig({}), []);
  assert.deepEqual(
    checkLintConfig({ analyzers: { core: { rules: { 'no-hardcoded-location': { level: 'warning' } } } } }),
    [],
  );
  assert.deepEqual(
    checkLintConfig({
      analyzers: {
        core: {
          enabled: false,
          rules: {
            'no-unused-params': { level: 'off' },
            'prefer-interpolation': { level: 'info' },
            'use-recent-api-versions': { maxAllowedAgeInDays: 9999 },
          },
        },
      },
    }),
    [
      'analyzers.core.enabled is false: the linter would not run',
      'analyzers.core.rules.no-unused-params.level is "off": only "warning" or "error" are allowed',
      'analyzers.core.rules.prefer-interpolation.level is "info": only "warning" or "error" are allowed',
      'analyzers.core.rules.use-recent-api-versions.level is undefined: only "warning" or "error" are allowed',
    ],
  );
});

test("lint config: the repository's infra/bicepconfig.json silences nothing", async () => {
  const { checkLintConfig } = await lintConfig();
  const config: unknown = JSON.parse(readFileSync(join(root, 'infra', 'bicepconfig.json'), 'utf8'));
  assert.deepEqual(checkLintConfig(config), []);
});

// The shape Bicep compiles `param` declarations to (from infra/main.bicep's compiled parameters).
const template: Json = {
  parameters: {
    environmentName: { type: 'string', minLength: 1, maxLength: 64 },
    location: { type: 'string', minLength: 1 },
    principalId: { type: 'string', defaultValue: '' },
    principalType: {
      type: 'string',
      defaultValue: 'User',
      allowedValues: ['User', 'ServicePrincipal', 'Group'],
    },
    instanceCount: { type: 'int', defaultValue: 1, minValue: 1, maxValue: 10 },
    zoneRedundant: { type: 'bool', defaultValue: false },
    tags: { type: 'object', defaultValue: {} },
    optionalNote: { type: 'string', nullable: true },
  },
};

test('parameters: azd substitutions and literals that fit the template pass', async () => {
  const { checkParameters } = await parameters();
  assert.deepEqual(
    checkParameters(template, {
      parameters: {
        environmentName: { value: '${AZURE_ENV_NAME}' },
        location: { value: '${AZURE_LOCATION=swedencentral}' },
        principalType: { value: 'ServicePrincipal' },
        instanceCount: { value: 3 },
        zoneRedundant: { value: true },
        tags: { value: { team: 'orders' } },
      },
    }),
    [],
  );
});

test('parameters: unknown, retyped, out-of-range and missing required parameters are each named', async () => {
  const { checkParameters } = await parameters();
  assert.deepEqual(
    checkParameters(template, {
      parameters: {
        environmentName: { value: '' },
        principalID: { value: '${AZURE_PRINCIPAL_ID}' },
        principalType: { value: 'Robot' },
        instanceCount: { value: '${INSTANCE_COUNT}' },
        zoneRedundant: { value: 'true' },
        tags: { value: ['orders'] },
        alertMail: { value: 'ops@example.com' },
        optionalNote: {},
      },
    }),
    [
      'parameter "environmentName": length 0 is below minLength 1',
      'parameter "principalID" is not declared by the template (it declares "principalId")',
      'parameter "principalType": "Robot" is not one of "User", "ServicePrincipal", "Group"',
      'parameter "instanceCount" is int but gets "${INSTANCE_COUNT}", which azd substitutes as a string',
      'parameter "zoneRedundant" is bool but gets a string ("true")',
      'parameter "tags" is object but gets an array (["orders"])',
      'parameter "alertMail" is not declared by the template',
      'parameter "optionalNote" must have exactly one of "value" or "reference"',
      'parameter "location" is required by the template (no default) but the file does not set it',
    ],
  );
  assert.deepEqual(
    checkParameters(template, {
      parameters: { environmentName: { value: 'e' }, location: { value: 'l' }, instanceCount: { value: 11 } },
    }),
    ['parameter "instanceCount": 11 is above maxValue 10'],
  );
  assert.deepEqual(checkParameters(template, { contentVersion: '1.0.0.0' }), [
    'the parameters file has no "parameters" object',
  ]);
});

test('the Bicep CLI version pinned in tools/bicep is the one docs/deploy.md records', async () => {
  const { pinnedVersion } = await bicepCli();
  const version = pinnedVersion(join(root, 'tools', 'bicep', 'bicep.csproj'));
  assert.match(version, /^\d+\.\d+\.\d+$/);
  const deployDoc = readFileSync(join(root, 'docs', 'deploy.md'), 'utf8');
  assert.ok(deployDoc.includes(`Bicep CLI ${version}`), `docs/deploy.md does not name Bicep CLI ${version}`);
});
