import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import * as api from '../shared/http/orderApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function getOrder(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.getOrder(await dependencies(), request, context));
}

app.http('getOrder', {
  methods: ['GET'],
  route: 'orders/{orderId}',
  authLevel: 'function',
  handler: getOrder,
});
