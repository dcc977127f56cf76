import { z } from 'zod';

/**
 * Azure's published limits as data (bench/limits.json), each with the page it comes from and the
 * day it was read, like the prices. Pure: the capacity bench reads the file, this validates it.
 */
const limit = z.object({
  value: z.number().positive().nullable(),
  unit: z.string().min(1),
  kind: z.enum(['target', 'limit', 'observed', 'quota', 'setting']),
  quote: z.string().min(1),
  title: z.string().min(1),
  source: z.url(),
  read: z.iso.date(),
  note: z.string().optional(),
  notFound: z.string().optional(),
});

const required = [
  'storageAccountRequestsPerSecond',
  'tablePartitionEntitiesPerSecond',
  'serviceBusStandardCreditsPerSecond',
  'serviceBusPremiumBytesPerSecondPerMessagingUnit',
  'serviceBusPremiumMessagingUnits',
  'flexMaximumInstanceCountDefault',
  'flexMaximumInstanceCountMax',
  'flexRegionalMemoryQuotaMB',
] as const;

export type LimitKey = (typeof required)[number];
export type Limit = z.infer<typeof limit>;

export const limitTableSchema = z.object({
  read: z.iso.date(),
  howRead: z.string().min(1),
  limits: z.record(z.string(), limit),
});

export interface LimitTable {
  read: string;
  limits: Record<string, Limit>;
  /** The value of a limit the model needs; throws naming it when the file has none. */
  value(key: LimitKey): number;
}

export function parseLimitTable(json: unknown): LimitTable {
  const parsed = limitTableSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`limit table: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const limits = parsed.data.limits;
  for (const [key, l] of Object.entries(limits)) {
    if (l.value === null && !l.notFound)
      throw new Error(`limit table: limits.${key}: a null value must say what was not found (notFound)`);
  }
  for (const key of required) {
    if (!limits[key]) throw new Error(`limit table: limits.${key} is missing`);
    if (limits[key].value === null) throw new Error(`limit table: limits.${key} has no value`);
  }
  return {
    read: parsed.data.read,
    limits,
    value: (key) => limits[key].value as number,
  };
}
