import type { ServiceBusEmulator } from '../emulators/servicebus/index.js';
import { RateLimiter } from './rateLimit.js';

/**
 * Service Bus Standard's throttle, scaled down: a namespace spends one credit per message sent or
 * received and one per filter evaluation, and past its credits per second a send is refused with
 * `com.microsoft:server-busy`, as Service Bus does. The refusal is the emulator's own (its
 * `refuseSend` hook, the broker's reject), not the AMQP proxy's: a proxy that swallowed a
 * transfer would leave the session's transfer ids and the link's credit out of step on both
 * sides. Sends, filter evaluations and deliveries are paid from the emulator's counters, so a
 * batch pays per message and a delivery pays when it happens; only sends are refused (a receive
 * past the limit would be slowed, and the debt it leaves refuses the next sends instead).
 */
export type Counters = ReturnType<ServiceBusEmulator['counters']>;

export class NamespaceCredits {
  private readonly limiter: RateLimiter;
  private source?: () => Counters;
  private readonly seen = new Map<string, number>();
  refused = 0;
  paid = 0;

  constructor(
    readonly creditsPerSecond: number,
    /** Topic path (lower case) -> rules over all its subscriptions: filter evaluations per send. */
    private readonly topicRules: Record<string, number>,
    /** Entities whose deliveries are not the app's (the bench's own status reader). */
    private readonly excluded: (path: string) => boolean = () => false,
    now?: () => number,
  ) {
    this.limiter = new RateLimiter(creditsPerSecond, now);
  }

  /** Where the counters come from (the emulator exists only after the hook is handed to it). */
  attach(source: () => Counters): void {
    this.source = source;
    this.pay(source());
  }

  /** The emulator's refuseSend hook. */
  readonly refuseSend = (): boolean => {
    if (this.source) this.pay(this.source());
    if (this.limiter.open('namespace')) return false;
    this.refused += 1;
    return true;
  };

  /** Pays for what the counters grew by since the last call. */
  pay(c: Counters): void {
    let credits = 0;
    const grew = (key: string, now: number) => {
      const d = now - (this.seen.get(key) ?? 0);
      this.seen.set(key, now);
      return d;
    };
    for (const s of c.senders) {
      const sent = grew(`sent:${s.path}`, s.sent + s.duplicates);
      credits += sent * (1 + (this.topicRules[s.path.toLowerCase()] ?? 0));
    }
    for (const e of c.entities) {
      if (this.excluded(e.path)) continue;
      credits += grew(`delivered:${e.path}`, e.delivered);
    }
    this.paid += credits;
    this.limiter.debit('namespace', credits);
  }
}
