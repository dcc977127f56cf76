import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import * as api from '../shared/http/serviceLimitsApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function serviceLimits(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.serviceLimits(await dependencies(), request, context));
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('serviceLimits', {
  methods: ['GET'],
  route: 'services/limits',
  authLevel: 'anonymous',
  handler: serviceLimits,
});
