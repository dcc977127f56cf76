import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import * as api from '../shared/http/orderApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function retryOrder(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.retryOrder(await dependencies(), request, context));
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('retryOrder', {
  methods: ['POST'],
  route: 'orders/{orderId}/retry',
  authLevel: 'anonymous',
  handler: retryOrder,
});
