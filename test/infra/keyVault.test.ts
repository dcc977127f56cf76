/**
 * The callback signing keys in Azure (issue 25): CALLBACK_SIGNING_KEYS is an app setting by Key
 * Vault reference, resolved with the app's user-assigned identity, which holds Key Vault Secrets
 * User on the vault by RBAC (no access policies); no key is in an app setting or a template.
 * Read as text like drift.test.ts; the check also runs on broken copies, to prove it can fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bicepAppSettings } from './drift-checks.js';
import { resources, stripComments } from './bicep-text.js';

const root = resolve(__dirname, '..', '..', '..');
const read = (path: string): string =>
  existsSync(join(root, path)) ? readFileSync(join(root, path), 'utf8') : '';

/** Key Vault Secrets User, from Microsoft's Azure built-in roles reference (Security). */
const keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6';

interface Files {
  main: string;
  api: string;
  keyVault: string;
}

function checkCallbackKeys(f: Files): string[] {
  const problems: string[] = [];
  const setting = bicepAppSettings(f.api).get('CALLBACK_SIGNING_KEYS');
  if (setting === undefined) problems.push('CALLBACK_SIGNING_KEYS missing from the Bicep app settings');
  else if (!/^'@Microsoft\.KeyVault\((VaultName=[^;]+;SecretName=|SecretUri=)/.test(setting))
    problems.push(`CALLBACK_SIGNING_KEYS is not a Key Vault reference: ${setting}`);
  // A user-assigned identity resolves references only when the site names it.
  if (!/keyVaultReferenceIdentity:\s*identityId\b/.test(stripComments(f.api)))
    problems.push('the Function App does not resolve Key Vault references with its identity');
  if (!/module\s+\w+\s+'app\/keyvault\.bicep'/.test(f.main))
    problems.push('main.bicep deploys no app/keyvault.bicep');
  const kv = stripComments(f.keyVault);
  const vault = resources(kv).find((r) => r.type === 'Microsoft.KeyVault/vaults' && !r.existing);
  if (!vault) problems.push('app/keyvault.bicep declares no vault');
  else {
    if (!/enableRbacAuthorization:\s*true/.test(vault.body)) problems.push('the vault does not use RBAC');
    if (/accessPolicies:\s*\[\s*\S/.test(vault.body)) problems.push('the vault grants access policies');
  }
  const grants = resources(kv).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
  // The role by its id, literally or through a `roles` entry that holds the id.
  const namesRole = (body: string) =>
    body.includes(keyVaultSecretsUser) ||
    (/roles\.keyVaultSecretsUser\b/.test(body) &&
      new RegExp(`keyVaultSecretsUser:\\s*'${keyVaultSecretsUser}'`).test(kv));
  const appGrant = grants.find((g) => namesRole(g.body) && /principalId:\s*appPrincipalId\b/.test(g.body));
  if (!appGrant) problems.push("the app's identity is not granted Key Vault Secrets User");
  else if (!/scope:\s*(vault|keyVault|secret)\b/.test(appGrant.body))
    problems.push('Key Vault Secrets User is not scoped to the vault');
  // Keys never in a template: a secret resource with a value would put one in the deployment.
  for (const r of resources(kv).filter((x) => x.type.endsWith('/secrets') && !x.existing))
    if (/\bvalue\s*:/.test(r.body)) problems.push(`secret ${r.symbol} has its value in the template`);
  return problems;
}

const files: Files = {
  main: read('infra/main.bicep'),
  api: read('infra/app/api.bicep'),
  keyVault: read('infra/app/keyvault.bicep'),
};

test('CALLBACK_SIGNING_KEYS by Key Vault reference; Key Vault Secrets User for the app identity by RBAC', () => {
  assert.deepEqual(checkCallbackKeys(files), []);
});

test('the check fails on broken copies', () => {
  const broken = (what: keyof Files, from: string | RegExp, to: string): Files => {
    const text = files[what].replace(from, to);
    assert.notEqual(text, files[what], `the broken copy of ${what} differs`);
    return { ...files, [what]: text };
  };
  const fails = (f: Files, pattern: RegExp) => {
    const problems = checkCallbackKeys(f);
    assert.ok(
      problems.some((p) => pattern.test(p)),
      `expected ${pattern}, got ${problems.join('; ')}`,
    );
  };
  fails(
    broken('api', /CALLBACK_SIGNING_KEYS:[^\n]*/, "CALLBACK_SIGNING_KEYS: 'k1:c2VjcmV0'"),
    /not a Key Vault reference/,
  );
  fails(broken('api', /keyVaultReferenceIdentity:[^\n]*/, ''), /resolve Key Vault references/);
  fails(
    broken('keyVault', /enableRbacAuthorization:\s*true/, 'enableRbacAuthorization: false'),
    /does not use RBAC/,
  );
  fails(broken('keyVault', keyVaultSecretsUser, '00000000-0000-0000-0000-000000000000'), /Secrets User/);
  fails(
    {
      ...files,
      keyVault: `${files.keyVault}\nresource s 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {\n  name: 'x'\n  properties: {\n    value: 'k'\n  }\n}\n`,
    },
    /value in the template/,
  );
});
