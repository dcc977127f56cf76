// Brings the pinned Bicep CLI from NuGet (tools/bicep/bicep.csproj, a restore-only project)
// and runs it. The package ships a self-contained binary, so the .NET SDK is needed only to
// restore it.
import { spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const PACKAGE = 'Azure.Bicep.CommandLine.linux-x64';

// No telemetry and no first-run banner in CI logs.
const DOTNET_ENV = {
  ...process.env,
  DOTNET_CLI_TELEMETRY_OPTOUT: '1',
  DOTNET_NOLOGO: '1',
  DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1',
};

/** @param {string} project path to tools/bicep/bicep.csproj */
export function pinnedVersion(project) {
  const text = readFileSync(project, 'utf8');
  const match = text.match(
    new RegExp(`Include="${PACKAGE.replace(/\./g, '\\.')}"\\s+Version="\\[([^\\]]+)\\]"`),
  );
  if (!match) throw new Error(`${project} has no exact (bracketed) version for ${PACKAGE}`);
  return match[1];
}

/**
 * Restores the package into tools/bicep/.packages and returns the binary's path.
 * @param {string} repo repository root
 * @returns {{ bicep: string, version: string }}
 */
export function restoreBicep(repo) {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `check:infra restores ${PACKAGE}, which runs on linux-x64 only; this is ${process.platform}-${process.arch}`,
    );
  }
  const project = join(repo, 'tools', 'bicep', 'bicep.csproj');
  const packages = join(repo, 'tools', 'bicep', '.packages');
  const version = pinnedVersion(project);
  const restore = spawnSync('dotnet', ['restore', project, '--packages', packages], {
    encoding: 'utf8',
    env: DOTNET_ENV,
  });
  if (restore.error?.code === 'ENOENT') {
    throw new Error(
      'check:infra needs the .NET SDK (`dotnet` on PATH) to restore the Bicep CLI from NuGet; see the README, Develop',
    );
  }
  if (restore.status !== 0) {
    throw new Error(
      `dotnet restore ${project} failed (exit ${restore.status}):\n${restore.stdout}${restore.stderr}`,
    );
  }
  const bicep = join(packages, PACKAGE.toLowerCase(), version, 'tools', 'bicep');
  if (!existsSync(bicep)) throw new Error(`the restore left no Bicep binary at ${bicep}`);
  // NuGet does not keep the execute bit for everyone on every platform.
  try {
    accessSync(bicep, constants.X_OK);
  } catch {
    chmodSync(bicep, 0o755);
  }
  const printed = runBicep(bicep, ['--version']).stdout.trim();
  if (!printed.startsWith(`Bicep CLI version ${version} `)) {
    throw new Error(`expected Bicep CLI ${version}, the binary says: ${printed}`);
  }
  return { bicep, version };
}

/**
 * @param {string} bicep path to the binary
 * @param {string[]} args
 */
export function runBicep(bicep, args) {
  const run = spawnSync(bicep, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.error) throw new Error(`could not run ${bicep}: ${run.error.message}`);
  return { status: run.status ?? 1, stdout: run.stdout, stderr: run.stderr };
}
