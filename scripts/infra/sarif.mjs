// Reads what the Bicep CLI reports with `--diagnostics-format sarif`.
// Structured output instead of the human text, so a change in wording cannot hide a warning.
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';

/**
 * @typedef {{ level: 'error' | 'warning' | 'note' | 'none', rule: string, message: string,
 *   file: string, line: number, column: number }} Finding
 */

/**
 * Parses one SARIF 2.1.0 document into findings. SARIF's default level is "warning" and
 * Bicep leaves `level` out for its warnings, so a result without one is a warning.
 * Throws when the text is not a SARIF log: an unreadable report must not pass as a clean one.
 * @param {string} text
 * @returns {Finding[]}
 */
export function readSarif(text) {
  let log;
  try {
    log = JSON.parse(text);
  } catch {
    throw new Error(`the Bicep CLI did not print a SARIF log; it printed:\n${text.slice(0, 2000)}`);
  }
  if (!log || !Array.isArray(log.runs)) {
    throw new Error(`not a SARIF log (no "runs"):\n${text.slice(0, 2000)}`);
  }
  const findings = [];
  for (const run of log.runs) {
    for (const result of run.results ?? []) {
      const where = result.locations?.[0]?.physicalLocation;
      const uri = where?.artifactLocation?.uri ?? '';
      findings.push({
        level: result.level ?? 'warning',
        rule: result.ruleId ?? '(no rule id)',
        message: result.message?.text ?? '',
        file: uri.startsWith('file:') ? fileURLToPath(uri) : uri,
        line: where?.region?.startLine ?? 0,
        column: where?.region?.charOffset ?? where?.region?.startColumn ?? 0,
      });
    }
  }
  return findings;
}

/**
 * Errors and warnings both fail the check: a warning about a property the resource type does
 * not know is a deployment failure waiting to happen.
 * @param {Finding} finding
 */
export function isBlocking(finding) {
  return finding.level === 'error' || finding.level === 'warning';
}

/**
 * @param {Finding} f
 * @param {string} root paths are shown relative to it
 */
export function formatFinding(f, root) {
  const file = f.file ? relative(root, f.file) || f.file : '(no file)';
  return `${file}(${f.line},${f.column}) ${f.level} ${f.rule}: ${f.message}`;
}
