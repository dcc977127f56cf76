import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import * as api from '../shared/http/retentionApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function holdOrder(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.holdOrder(await dependencies(), request, context));
}

export async function releaseOrder(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.releaseOrder(await dependencies(), request, context));
}

export async function retentionReadout(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.retentionReadout(await dependencies(), request, context));
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('holdOrder', {
  methods: ['POST'],
  route: 'orders/{orderId}/hold',
  authLevel: 'anonymous',
  handler: holdOrder,
});

app.http('releaseOrder', {
  methods: ['POST'],
  route: 'orders/{orderId}/release',
  authLevel: 'anonymous',
  handler: releaseOrder,
});

app.http('retentionReadout', {
  methods: ['GET'],
  route: 'orders/retention',
  authLevel: 'anonymous',
  handler: retentionReadout,
});
