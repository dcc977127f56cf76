import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { loadWaitingSettings } from '../shared/config/waitingSettings.js';
import { dependencies } from '../shared/app/runtime.js';
import { withProblemErrors } from '../shared/http/errors.js';
import { receiveCallback, receiveHeartbeat } from '../shared/callbacks/callbackApi.js';

settings();
loadWaitingSettings(); // a malformed CALLBACK_* setting fails start-up, naming it

/** A waiting step's outcome, from the service that accepted the work (callbackApi.ts). */
export async function stepCallback(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => receiveCallback(await dependencies(), request, context));
}

export async function stepHeartbeat(
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  return withProblemErrors(context, async () => receiveHeartbeat(await dependencies(), request, context));
}

// Anonymous to the host: the token in the path is the service's only credential (never a function key).
app.http('stepCallback', {
  methods: ['POST'],
  route: 'callbacks/{token}',
  authLevel: 'anonymous',
  handler: stepCallback,
});

app.http('stepHeartbeat', {
  methods: ['POST'],
  route: 'callbacks/{token}/heartbeat',
  authLevel: 'anonymous',
  handler: stepHeartbeat,
});
