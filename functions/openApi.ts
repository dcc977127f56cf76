import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { openApiDocument, openApiRoute } from '../shared/http/openapi.js';

export async function openApi(_request: HttpRequest, _context: InvocationContext): Promise<HttpResponseInit> {
  return {
    status: 200,
    headers: { 'Cache-Control': 'public, max-age=300' },
    jsonBody: openApiDocument(),
  };
}

// Anonymous: the document is built from code alone and reveals no data or keys, and clients and
// tools need it before they hold a key (Azure's own Functions OpenAPI extension serves it
// anonymously for the same reason). Every route it describes still needs the function key.
app.http('openApi', { methods: ['GET'], route: openApiRoute, authLevel: 'anonymous', handler: openApi });
