import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import { decideApproval } from '../shared/http/approvalApi.js';

settings();

export async function orderApproval(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => decideApproval(await dependencies(), request, context));
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('orderApproval', {
  methods: ['POST'],
  route: 'orders/{orderId}/approval',
  authLevel: 'anonymous',
  handler: orderApproval,
});
