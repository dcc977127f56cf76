// A bicepconfig.json may make the linter stricter, never quieter: turning a rule off (or down
// to "info") would let `npm run check:infra` pass over what it exists to catch. Fix the
// finding instead.

const LOUD_ENOUGH = new Set(['warning', 'error']);

/**
 * @param {any} config the parsed bicepconfig.json
 * @returns {string[]} one sentence per setting that silences the linter
 */
export function checkLintConfig(config) {
  const problems = [];
  const analyzers = config?.analyzers;
  if (analyzers === undefined) return problems;
  const core = analyzers?.core;
  if (core?.enabled === false) problems.push('analyzers.core.enabled is false: the linter would not run');
  for (const [rule, settings] of Object.entries(core?.rules ?? {})) {
    const level = settings?.level;
    if (!LOUD_ENOUGH.has(level)) {
      problems.push(
        `analyzers.core.rules.${rule}.level is ${JSON.stringify(level)}: only "warning" or "error" are allowed`,
      );
    }
  }
  return problems;
}
