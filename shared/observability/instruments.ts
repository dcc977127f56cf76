import { metrics, type Meter, type MeterProvider } from '@opentelemetry/api';
import { meterName } from './metricNames.js';

/**
 * Instruments made on first use from the global meter provider, and made again when the provider
 * changes (telemetry set up after a module loaded, tests that swap providers).
 */
export function lazyInstruments<T>(make: (meter: Meter) => T): () => T {
  let made: { provider: MeterProvider; instruments: T } | undefined;
  return () => {
    const provider = metrics.getMeterProvider();
    if (made?.provider !== provider) made = { provider, instruments: make(provider.getMeter(meterName)) };
    return made.instruments;
  };
}
