import type { FunctionMetadata } from './rpc.js';

/** The trigger types the local host runs; a function with any other one is listed as not run. */
const runnableTriggers = new Set(['httptrigger', 'servicebustrigger', 'timertrigger']);
/** The output binding types it carries out. */
const runnableOutputs = new Set(['http', 'servicebus']);

/**
 * Why the local host cannot run a function, or undefined when it can. A function it cannot run
 * faithfully (a trigger it has no listener for, an input it cannot fill, an output it would drop)
 * is listed as not run instead of being half-run or stopping the whole app: the Azure host runs
 * every valid app, and the rest of the app should run here too.
 */
export function notRunReason(metadata: FunctionMetadata, triggerName: string): string | undefined {
  const reasons: string[] = [];
  for (const [name, binding] of Object.entries(metadata.bindings)) {
    const type = String(binding.type);
    if (name === triggerName) {
      if (!runnableTriggers.has(type.toLowerCase())) {
        reasons.push(
          `trigger type "${type}" is not run here (only httpTrigger, serviceBusTrigger and timerTrigger are)`,
        );
      } else if (type.toLowerCase() === 'servicebustrigger' && binding.isSessionsEnabled === true) {
        reasons.push('session-enabled Service Bus triggers are not run here');
      }
    } else if (binding.direction === 'in') {
      reasons.push(
        `input binding "${name}" of type "${type}" is not filled here (the handler would get undefined)`,
      );
    } else if (binding.direction === 'out' && !runnableOutputs.has(type.toLowerCase())) {
      reasons.push(
        `output binding "${name}" of type "${type}" is not sent here (only http and serviceBus outputs are); its values would be lost`,
      );
    }
  }
  return reasons.length > 0 ? reasons.join('; ') : undefined;
}
