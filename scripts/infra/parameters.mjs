// Checks a deployment parameters file (infra/main.parameters.json) against the parameters of
// the ARM template Bicep compiled, so a renamed, retyped or newly required parameter fails in
// CI instead of at `azd provision`.

// azd replaces `${NAME}` (and `${NAME=default}`) in the file's text before deploying, so such a
// value is always a string by the time ARM sees it.
const AZD_SUBSTITUTION = /\$\{[A-Za-z_][A-Za-z0-9_]*(=[^}]*)?\}/;

/** @param {unknown} v */
function isPlainObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The JSON type ARM expects for a template parameter type, or undefined when the template
 * gives none (a user-defined type by `$ref`), which is then not checked.
 * @param {string | undefined} armType
 */
function expectedJsonType(armType) {
  switch ((armType ?? '').toLowerCase()) {
    case 'string':
    case 'securestring':
      return 'string';
    case 'int':
      return 'integer';
    case 'bool':
      return 'boolean';
    case 'object':
    case 'secureobject':
      return 'object';
    case 'array':
      return 'array';
    default:
      return undefined;
  }
}

/** @param {unknown} v */
function jsonTypeOf(v) {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** @param {string} noun */
function withArticle(noun) {
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`;
}

/**
 * @param {string} name
 * @param {Record<string, any>} definition the template's declaration of the parameter
 * @param {unknown} value a literal value (no azd substitution in it)
 * @returns {string[]}
 */
function literalProblems(name, definition, value) {
  const problems = [];
  if (Array.isArray(definition.allowedValues)) {
    const allowed = definition.allowedValues.map((a) => JSON.stringify(a));
    if (!allowed.includes(JSON.stringify(value))) {
      problems.push(`parameter "${name}": ${JSON.stringify(value)} is not one of ${allowed.join(', ')}`);
    }
  }
  const length = typeof value === 'string' || Array.isArray(value) ? value.length : undefined;
  if (length !== undefined && typeof definition.minLength === 'number' && length < definition.minLength) {
    problems.push(`parameter "${name}": length ${length} is below minLength ${definition.minLength}`);
  }
  if (length !== undefined && typeof definition.maxLength === 'number' && length > definition.maxLength) {
    problems.push(`parameter "${name}": length ${length} is above maxLength ${definition.maxLength}`);
  }
  if (typeof value === 'number' && typeof definition.minValue === 'number' && value < definition.minValue) {
    problems.push(`parameter "${name}": ${value} is below minValue ${definition.minValue}`);
  }
  if (typeof value === 'number' && typeof definition.maxValue === 'number' && value > definition.maxValue) {
    problems.push(`parameter "${name}": ${value} is above maxValue ${definition.maxValue}`);
  }
  return problems;
}

/**
 * @param {{ parameters?: Record<string, Record<string, any>> }} template compiled ARM template
 * @param {{ parameters?: Record<string, Record<string, any>> }} parametersFile deployment parameters file
 * @returns {string[]} one sentence per problem; empty when the file fits the template
 */
export function checkParameters(template, parametersFile) {
  const declared = isPlainObject(template?.parameters) ? template.parameters : {};
  if (!isPlainObject(parametersFile?.parameters)) {
    return ['the parameters file has no "parameters" object'];
  }
  const given = parametersFile.parameters;
  const problems = [];

  for (const [name, entry] of Object.entries(given)) {
    const definition = declared[name];
    if (!definition) {
      const sameButCase = Object.keys(declared).find((d) => d.toLowerCase() === name.toLowerCase());
      problems.push(
        sameButCase
          ? `parameter "${name}" is not declared by the template (it declares "${sameButCase}")`
          : `parameter "${name}" is not declared by the template`,
      );
      continue;
    }
    if (!isPlainObject(entry) || 'value' in entry === 'reference' in entry) {
      problems.push(`parameter "${name}" must have exactly one of "value" or "reference"`);
      continue;
    }
    // A Key Vault reference resolves at deployment; nothing more to check here.
    if ('reference' in entry) continue;

    const value = entry.value;
    const expected = expectedJsonType(definition.type);
    const substituted = typeof value === 'string' && AZD_SUBSTITUTION.test(value);
    if (expected && jsonTypeOf(value) !== expected) {
      problems.push(
        substituted
          ? `parameter "${name}" is ${definition.type} but gets ${JSON.stringify(value)}, which azd substitutes as a string`
          : `parameter "${name}" is ${definition.type} but gets ${withArticle(jsonTypeOf(value))} (${JSON.stringify(value)})`,
      );
      continue;
    }
    // The value of `${NAME}` is only known at deployment.
    if (!substituted) problems.push(...literalProblems(name, definition, value));
  }

  for (const [name, definition] of Object.entries(declared)) {
    const optional = 'defaultValue' in definition || definition.nullable === true;
    if (!optional && !(name in given)) {
      problems.push(
        `parameter "${name}" is required by the template (no default) but the file does not set it`,
      );
    }
  }
  return problems;
}
