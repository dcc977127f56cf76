import assert from 'node:assert/strict';
import type { HttpResponseInit } from '@azure/functions';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { openApiDocument, type OpenApiDocument, type ResponseObject } from '../../shared/http/openapi.js';

/**
 * Checks an HTTP answer against the OpenAPI document: the operation and status are documented,
 * the media type is one the status declares, the body validates against its JSON Schema (2020-12,
 * with ajv), required headers are present and valid, and an answer documented without content
 * has no body. Any API test can use it:
 *
 *   await assertDocumented(stack.baseUrl, method, path, response)   // over HTTP, served document
 *   documented().assert(method, path, fromHandler(await handler(...)))  // a handler's result
 */
export interface ObservedResponse {
  status: number;
  headers: Headers | Record<string, string>;
  /** The raw body text ('' when empty). */
  body: string;
}

const documentId = 'https://openapi.invalid/openapi.json';
const pointer = (segments: string[]) =>
  '#/' + segments.map((s) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');

function headerOf(headers: ObservedResponse['headers'], name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  const found = Object.entries(headers).find(([k]) => k.toLowerCase() === name.toLowerCase());
  return found ? String(found[1]) : null;
}

export class OpenApiValidator {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly paths: Array<{ template: string; regex: RegExp; params: number }>;
  private readonly basePath: string;

  constructor(readonly document: OpenApiDocument) {
    // Not strict: the document is OpenAPI, not a pure schema, and carries keys ajv does not know.
    this.ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(this.ajv);
    this.ajv.addSchema({ ...document, $id: documentId });
    this.paths = Object.keys(document.paths)
      .map((template) => ({
        template,
        regex: new RegExp(
          '^' +
            template
              .split(/\{[^}]+\}/)
              .map((s) => s.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
              .join('[^/]+') +
            '$',
        ),
        params: (template.match(/\{/g) ?? []).length,
      }))
      // Fewer parameters first, then literal segments before a parameter (as the host matches):
      // /orders/bulk/{action} before /orders/{orderId}/cancel.
      .sort((a, b) => a.params - b.params || b.template.indexOf('{') - a.template.indexOf('{'));
    const servers = (document.servers as Array<{ url: string }> | undefined) ?? [];
    this.basePath = new URL(servers[0]?.url ?? '/', 'http://x').pathname.replace(/\/$/, '');
  }

  /** The document as the running app serves it. */
  static async served(baseUrl: string): Promise<OpenApiValidator> {
    const res = await fetch(`${baseUrl}/openapi.json`);
    assert.equal(res.status, 200, `GET ${baseUrl}/openapi.json answered ${res.status}`);
    return new OpenApiValidator((await res.json()) as OpenApiDocument);
  }

  /** The path template documenting a request path (relative to the server URL, or a full URL). */
  templateOf(path: string): string | undefined {
    let p = path.split('?')[0]!;
    if (/^https?:/.test(p)) p = new URL(p).pathname;
    if (this.basePath && p.startsWith(`${this.basePath}/`)) p = p.slice(this.basePath.length);
    return this.paths.find((t) => t.regex.test(p))?.template;
  }

  /** Every way the answer deviates from the document; empty when it matches. */
  deviations(method: string, path: string, response: ObservedResponse): string[] {
    const where = `${method.toUpperCase()} ${path} -> ${response.status}`;
    const template = this.templateOf(path);
    const operation = template ? this.document.paths[template]?.[method.toLowerCase()] : undefined;
    if (!template || !operation) return [`${where}: no documented operation`];
    const status = String(response.status);
    const key = [status, `${status[0]}XX`, 'default'].find((k) => k in operation.responses);
    if (!key) {
      return [
        `${where}: status ${status} is not documented for ${method.toUpperCase()} ${template} (documented: ${Object.keys(operation.responses).join(', ')})`,
      ];
    }
    const documented: ResponseObject = operation.responses[key]!;
    const base = ['paths', template, method.toLowerCase(), 'responses', key];
    const out: string[] = [];

    for (const name of Object.keys(documented.headers ?? {})) {
      const at = this.locate([...base, 'headers', name]);
      const header = this.node(at) as { required?: boolean; schema?: unknown };
      const value = headerOf(response.headers, name);
      if (value === null) {
        if (header.required) out.push(`${where}: required header ${name} is missing`);
        continue;
      }
      if (header.schema === undefined) continue;
      const validate = this.compile([...at, 'schema']);
      if (!validate(value))
        out.push(`${where}: header ${name}=${JSON.stringify(value)}: ${this.errors(validate)}`);
    }

    const contentType = headerOf(response.headers, 'content-type');
    if (!documented.content) {
      if (response.body !== '')
        out.push(`${where}: documented without a body, got ${response.body.slice(0, 100)}`);
      return out;
    }
    const mediaType = contentType?.split(';')[0]!.trim().toLowerCase();
    if (!mediaType || !documented.content[mediaType]) {
      out.push(
        `${where}: content type ${JSON.stringify(contentType)} is not one of ${Object.keys(documented.content).join(', ')}`,
      );
      return out;
    }
    let body: unknown = response.body;
    // Pages and assets (the console) are text; every other body is JSON.
    if (/[/+]json$/.test(mediaType)) {
      try {
        body = JSON.parse(response.body);
      } catch {
        out.push(`${where}: the body is not JSON: ${response.body.slice(0, 100)}`);
        return out;
      }
    }
    const validate = this.compile([...base, 'content', mediaType, 'schema']);
    if (!validate(body)) out.push(`${where}: body ${this.errors(validate)}`);
    return out;
  }

  /** Throws listing every deviation. */
  assert(method: string, path: string, response: ObservedResponse): void {
    const found = this.deviations(method, path, response);
    assert.deepEqual(found, [], `the answer deviates from the OpenAPI document:\n${found.join('\n')}`);
  }

  private node(segments: string[]): unknown {
    return segments.reduce<unknown>(
      (node, s) => (node as Record<string, unknown> | undefined)?.[s],
      this.document,
    );
  }

  /** Where the object at `segments` really is, following its $ref (a header's, say). */
  private locate(segments: string[]): string[] {
    let at = segments;
    for (
      let n = this.node(at) as { $ref?: string };
      typeof n?.$ref === 'string';
      n = this.node(at) as { $ref?: string }
    ) {
      at = n.$ref
        .replace(/^#\//, '')
        .split('/')
        .map((s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'));
    }
    return at;
  }

  /** The schema at a location in the document, compiled once; its $refs resolve inside the document. */
  private compile(segments: string[]): ValidateFunction {
    const ref = documentId + pointer(segments);
    let validate = this.compiled.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: ref });
      this.compiled.set(ref, validate);
    }
    return validate;
  }

  private errors(validate: ValidateFunction): string {
    return this.ajv.errorsText(validate.errors, { separator: '; ' });
  }
}

let local: OpenApiValidator | undefined;
/** The document this build generates, without a running app (for handler-level tests). */
export function documented(): OpenApiValidator {
  local ??= new OpenApiValidator(openApiDocument());
  return local;
}

const servedByBase = new Map<string, Promise<OpenApiValidator>>();
/** One-line hook for HTTP tests: checks the answer against the document the app at baseUrl serves. */
export async function assertDocumented(
  baseUrl: string,
  method: string,
  path: string,
  response: ObservedResponse,
): Promise<void> {
  let validator = servedByBase.get(baseUrl);
  if (!validator) {
    validator = OpenApiValidator.served(baseUrl);
    servedByBase.set(baseUrl, validator);
  }
  (await validator).assert(method, path, response);
}

/** A handler's HttpResponseInit as the client would see it (jsonBody is sent as application/json). */
export function fromHandler(init: HttpResponseInit): ObservedResponse {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries((init.headers ?? {}) as Record<string, string>))
    headers[k.toLowerCase()] = v;
  let body = '';
  if (init.jsonBody !== undefined) {
    body = JSON.stringify(init.jsonBody);
    headers['content-type'] ??= 'application/json';
  } else if (typeof init.body === 'string') body = init.body;
  else if (init.body !== undefined && init.body !== null)
    throw new Error('fromHandler reads string or jsonBody bodies only');
  return { status: init.status ?? 200, headers, body };
}

/**
 * fetch(), then the answer checked against the served document: a drop-in for tests that call
 * the API with fetch (`fetch(`${base}${path}`, init)` becomes `documentedFetch(base, path, init)`).
 */
export async function documentedFetch(
  baseUrl: string,
  path: string,
  init: RequestInit = {},
): Promise<Response> {
  const res = await fetch(`${baseUrl}${path}`, init);
  const body = await res.clone().text();
  await assertDocumented(baseUrl, init.method ?? 'GET', path, {
    status: res.status,
    headers: res.headers,
    body,
  });
  return res;
}
