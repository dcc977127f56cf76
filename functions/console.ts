import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import { consoleAsset, consoleOrder, consolePage } from '../shared/http/consoleApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function operatorConsole(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => consolePage(request));
}

export async function operatorConsoleAsset(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => consoleAsset(request));
}

export async function operatorConsoleOrder(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => consoleOrder(await dependencies(), request, context));
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('operatorConsole', {
  methods: ['GET'],
  route: 'console',
  authLevel: 'anonymous',
  handler: operatorConsole,
});
// Anonymous: the built bundle, code without data (every data request meets requireOperator).
app.http('operatorConsoleAsset', {
  methods: ['GET'],
  route: 'console/assets/{file}',
  authLevel: 'anonymous',
  handler: operatorConsoleAsset,
});
app.http('operatorConsoleOrder', {
  methods: ['GET'],
  route: 'console/orders/{orderId}',
  authLevel: 'anonymous',
  handler: operatorConsoleOrder,
});
