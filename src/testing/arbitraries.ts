/**
 * fast-check arbitraries for property tests of Laurel configurations and adapters.
 */
import fc from 'fast-check';
import type { LaurelConfig } from '../config/define.js';

/** Valid user ids (1..255 characters, any unicode). */
export const arbUserId = (): fc.Arbitrary<string> => fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }).filter((s) => s.length >= 1 && s.length <= 255);

/** Finite event values with up to `decimals` decimal places, positive or negative. */
export const arbValue = (options: { decimals?: number; max?: number; allowNegative?: boolean } = {}): fc.Arbitrary<number> => {
  const decimals = options.decimals ?? 2;
  const max = options.max ?? 1000;
  const scale = 10 ** decimals;
  return fc.integer({ min: options.allowNegative === false ? 1 : -max * scale, max: max * scale }).map((n) => Number((n / scale).toFixed(decimals)));
};

/** Some IANA zones, including extremes and DST-observing ones. */
export const TIME_ZONES = ['UTC', 'Europe/Paris', 'Europe/Berlin', 'America/New_York', 'America/Los_Angeles', 'Asia/Tokyo', 'Australia/Lord_Howe', 'Pacific/Kiritimati', 'Pacific/Pago_Pago', 'Asia/Kathmandu'] as const;
export const arbTimeZone = (): fc.Arbitrary<string> => fc.constantFrom(...TIME_ZONES);

/** Instants between two dates (ms precision). */
export const arbInstant = (from = '2024-01-01T00:00:00Z', to = '2027-01-01T00:00:00Z'): fc.Arbitrary<Date> =>
  fc.integer({ min: Date.parse(from), max: Date.parse(to) }).map((ms) => new Date(ms));

export interface ArbEvent {
  metricKey: string;
  user: { id: string; tz?: string };
  value: number;
  attributes?: Record<string, string>;
  idempotencyKey?: string;
  /** Milliseconds after the previous event. */
  gapMs: number;
}

/**
 * Sequences of events valid for `config`: its metrics, its declared event attributes (values drawn from
 * `attributeValues`), a few users, optional idempotency keys (some repeated), and gaps between events.
 */
export function arbEventSequence(
  config: LaurelConfig,
  options: { users?: string[]; maxLength?: number; attributeValues?: string[]; maxGapMs?: number; idempotency?: boolean; decimals?: number; allowNegative?: boolean } = {},
): fc.Arbitrary<ArbEvent[]> {
  const users = options.users ?? ['u1', 'u2', 'u3'];
  const metricKeys = config.metrics.map((m) => m.key);
  const eventAttrs = [...config.index.eventAttributes];
  const values = options.attributeValues ?? ['a', 'b'];
  const event: fc.Arbitrary<ArbEvent> = fc.record({
    metricKey: fc.constantFrom(...metricKeys),
    user: fc.record({ id: fc.constantFrom(...users) }),
    value: arbValue({ decimals: options.decimals ?? 2, max: 50, ...(options.allowNegative !== undefined ? { allowNegative: options.allowNegative } : {}) }),
    attributes: eventAttrs.length ? fc.dictionary(fc.constantFrom(...eventAttrs), fc.constantFrom(...values), { maxKeys: eventAttrs.length }) : fc.constant({}),
    idempotencyKey: options.idempotency ? fc.option(fc.constantFrom('k1', 'k2', 'k3', 'k4'), { nil: undefined }) : fc.constant(undefined),
    gapMs: fc.integer({ min: 0, max: options.maxGapMs ?? 3 * 86_400_000 }),
  }).map((e) => {
    const out: ArbEvent = { metricKey: e.metricKey, user: e.user, value: e.value, gapMs: e.gapMs, attributes: e.attributes };
    if (e.idempotencyKey !== undefined) out.idempotencyKey = e.idempotencyKey;
    return out;
  });
  return fc.array(event, { minLength: 1, maxLength: options.maxLength ?? 30 });
}

/** A deterministic id source for pure-core tests: `id-1`, `id-2`, ... */
export function sequentialIds(prefix = 'id'): () => string {
  let n = 0;
  return () => `${prefix}-${++n}`;
}
