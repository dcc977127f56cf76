import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import * as api from '../shared/http/deadLetterApi.js';

settings(); // fail at start-up, naming the setting, rather than on the first request

export async function deadLetterCounts(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => api.deadLetterCounts(await dependencies(), request, context));
}

export async function deadLetterMessages(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () =>
    api.deadLetterMessages(await dependencies(), request, context),
  );
}

export async function redriveDeadLetters(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () =>
    api.redriveDeadLetters(await dependencies(), request, context),
  );
}

export async function discardDeadLetters(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () =>
    api.discardDeadLetters(await dependencies(), request, context),
  );
}

// Anonymous to the host: an operator signs in with Entra ID, not a function key (see requireOperator).
app.http('deadLetterCounts', {
  methods: ['GET'],
  route: 'deadletters',
  authLevel: 'anonymous',
  handler: deadLetterCounts,
});
app.http('deadLetterMessages', {
  methods: ['GET'],
  route: 'deadletters/messages',
  authLevel: 'anonymous',
  handler: deadLetterMessages,
});
app.http('redriveDeadLetters', {
  methods: ['POST'],
  route: 'deadletters/redrive',
  authLevel: 'anonymous',
  handler: redriveDeadLetters,
});
app.http('discardDeadLetters', {
  methods: ['POST'],
  route: 'deadletters/discard',
  authLevel: 'anonymous',
  handler: discardDeadLetters,
});
