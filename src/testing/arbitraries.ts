/**
 * fast-check arbitraries for property tests of Laurel configurations and adapters: ids, values, zones and
 * instants; event sequences; whole configurations (`arbConfig`); operator actions (`arbAction`) and timed
 * scenarios of events and actions (`arbScenario`), with `runScenarioStep` to play one step on an engine.
 *
 * Sizes: every arbitrary that produces a list takes an explicit fast-check `size` (`'xsmall'`, `'small'`,
 * `'medium'`, `'large'`, `'xlarge'`, `'='` for fast-check's global `baseSize`, or `'max'`). The lists'
 * bounds (`minLength`/`maxLength`, `maxSteps`...) are always honoured exactly: with the default `size`
 * (`'max'`), a list asked for at most 80 items does reach 80; a smaller `size` makes long lists rarer (fast-check
 * still shrinks towards short ones either way).
 */
import fc from 'fast-check';
import type { LaurelConfig } from '../config/define.js';
import type { ConfigInput } from '../config/schema.js';
import type { PreferencesPatch, UserInput } from '../core/types.js';
import type { Engine } from '../engine/engine.js';
import type { BatchEvent } from '../engine/batch.js';

/** fast-check's size of generated lists (see the module comment): `'max'` lets lists reach their `maxLength`. */
export type ArbSize = fc.SizeForArbitrary;

/** The default `size` of every list arbitrary here: lists may reach the `maxLength` they are given. */
const DEFAULT_SIZE: ArbSize = 'max';

/** Valid user ids (1..255 characters, any unicode). */
export const arbUserId = (): fc.Arbitrary<string> => fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme', size: DEFAULT_SIZE }).filter((s) => s.length >= 1 && s.length <= 255);

/**
 * A range of event values: from `min` to `max` (both included; default 1 to 50), with at most `decimals`
 * decimal places (default 2). A negative `min` is how negative values are asked for.
 */
export interface ValueRange {
  min?: number;
  max?: number;
  decimals?: number;
}

const valueIn = (min: number, max: number, decimals: number): fc.Arbitrary<number> => {
  if (!Number.isFinite(min) || !Number.isFinite(max) || min > max) throw new RangeError(`value range [${min}, ${max}] is empty or not finite`);
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 10) throw new RangeError(`decimals must be an integer from 0 to 10 (got ${decimals})`);
  const scale = 10 ** decimals;
  const lo = Math.ceil(min * scale);
  const hi = Math.floor(max * scale);
  if (lo > hi) throw new RangeError(`value range [${min}, ${max}] holds no value with ${decimals} decimals`);
  return fc.integer({ min: lo, max: hi }).map((n) => Number((n / scale).toFixed(decimals)));
};

/**
 * Finite event values with up to `decimals` decimal places (default 2). By default positive: mostly small
 * whole numbers (1 to 5), else any value from `10^-decimals` to `max` (default 1000). `allowNegative: true`
 * draws from `-max` to `max` instead; `min` sets the lower bound explicitly (negative only when asked).
 */
export const arbValue = (options: { decimals?: number; min?: number; max?: number; allowNegative?: boolean } = {}): fc.Arbitrary<number> => {
  const decimals = options.decimals ?? 2;
  const max = options.max ?? 1000;
  if (options.min !== undefined) return valueIn(options.min, max, decimals);
  if (options.allowNegative === true) return valueIn(-max, max, decimals);
  const smallest = 10 ** -decimals;
  const small = Math.min(5, Math.floor(max));
  const any = valueIn(smallest, max, decimals);
  return small >= 1 ? fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: small }) }, { weight: 2, arbitrary: any }) : any;
};

/** Checks every range of `values` up front, so that a bad range fails where the arbitrary is built. */
const checkRanges = (values: Readonly<Record<string, ValueRange>> | undefined, decimals: number | undefined): void => {
  for (const range of Object.values(values ?? {})) valueIn(range.min ?? 1, range.max ?? 50, range.decimals ?? decimals ?? 2);
};

/** Values of one metric: its range in `values`, else `arbValue` with the shared options. */
const metricValue = (metricKey: string, options: { values?: Readonly<Record<string, ValueRange>>; decimals?: number; allowNegative?: boolean; max?: number }): fc.Arbitrary<number> => {
  const range = options.values?.[metricKey];
  const decimals = range?.decimals ?? options.decimals ?? 2;
  if (range) return valueIn(range.min ?? 1, range.max ?? 50, decimals);
  return arbValue({ decimals, max: options.max ?? 50, ...(options.allowNegative !== undefined ? { allowNegative: options.allowNegative } : {}) });
};

/** Some IANA zones, including extremes and DST-observing ones. */
export const TIME_ZONES = ['UTC', 'Europe/Paris', 'Europe/Berlin', 'America/New_York', 'America/Los_Angeles', 'Asia/Tokyo', 'Australia/Lord_Howe', 'Pacific/Kiritimati', 'Pacific/Pago_Pago', 'Asia/Kathmandu'] as const;

/** One of {@link TIME_ZONES}. */
export const arbTimeZone = (): fc.Arbitrary<string> => fc.constantFrom(...TIME_ZONES);

/** Instants between two dates (ms precision). */
export const arbInstant = (from = '2024-01-01T00:00:00Z', to = '2027-01-01T00:00:00Z'): fc.Arbitrary<Date> =>
  fc.integer({ min: Date.parse(from), max: Date.parse(to) }).map((ms) => new Date(ms));

/** The zones `zones` asks for: none (`false`/absent), {@link TIME_ZONES} (`true`) or the list given. */
const zoneList = (zones: boolean | readonly string[] | undefined): readonly string[] => {
  if (zones === true) return TIME_ZONES;
  if (!zones) return [];
  if (zones.length === 0) throw new RangeError('zones: the list must not be empty');
  return zones;
};

/** One zone per user of the pool (fixed for a whole sequence), or none. */
const zonesOf = (users: readonly string[], zones: readonly string[]): fc.Arbitrary<(string | undefined)[]> =>
  zones.length === 0 ? fc.constant(users.map(() => undefined)) : fc.tuple(...users.map(() => fc.constantFrom(...zones)));

/** An event of {@link arbEventSequence}: a metric, a user, a value, attributes, an idempotency key, a gap. */
export interface ArbEvent {
  metricKey: string;
  /** The user; `tz` is set when zones were asked for (one zone per user for the whole sequence). */
  user: { id: string; tz?: string };
  value: number;
  attributes?: Record<string, string>;
  idempotencyKey?: string;
  /** Milliseconds after the previous event. */
  gapMs: number;
}

/** Options of {@link arbEventSequence}. */
export interface ArbEventSequenceOptions {
  /** The user pool (default `u1`, `u2`, `u3`): users repeat. */
  users?: string[];
  /** At least this many events (default 1). */
  minLength?: number;
  /** At most this many events (default 30), reached with the default `size`. */
  maxLength?: number;
  /** fast-check's size of the list (default `'max'`: lengths spread up to `maxLength`). */
  size?: ArbSize;
  /** Values of the declared event attributes (default `a`, `b`). */
  attributeValues?: string[];
  /** Largest gap between two events (default 3 days). */
  maxGapMs?: number;
  /** Idempotency keys from a small pool (`k1`..`k4`), so some repeat. */
  idempotency?: boolean;
  /** Decimal places of values without a range in `values` (default 2). */
  decimals?: number;
  /** Values from `-50` to `50` for metrics without a range in `values` (default: positive values only). */
  allowNegative?: boolean;
  /** Per-metric value ranges (`{ lessons: { min: 1, max: 3, decimals: 0 } }`); a negative `min` allows negatives. */
  values?: Readonly<Record<string, ValueRange>>;
  /** Users' zones: `true` for {@link TIME_ZONES}, or a list; each user keeps one zone, carried as `user.tz`. */
  zones?: boolean | readonly string[];
}

/**
 * Sequences of events valid for `config`: its metrics, its declared event attributes (values drawn from
 * `attributeValues`), a few users, optional idempotency keys (some repeated), and gaps between events.
 * Lengths honour `minLength`/`maxLength` exactly; `size` (default `'max'`) shapes how long they usually are.
 */
export function arbEventSequence(config: LaurelConfig, options: ArbEventSequenceOptions = {}): fc.Arbitrary<ArbEvent[]> {
  checkRanges(options.values, options.decimals);
  const users = options.users ?? ['u1', 'u2', 'u3'];
  const metricKeys = config.metrics.map((m) => m.key);
  const eventAttrs = [...config.index.eventAttributes];
  const attributeValues = options.attributeValues ?? ['a', 'b'];
  const size = options.size ?? DEFAULT_SIZE;
  const userIndex = fc.integer({ min: 0, max: users.length - 1 });
  const event = fc.record({
    metric: fc.constantFrom(...metricKeys).chain((metricKey) => metricValue(metricKey, options).map((value) => ({ metricKey, value }))),
    user: userIndex,
    attributes: eventAttrs.length ? fc.dictionary(fc.constantFrom(...eventAttrs), fc.constantFrom(...attributeValues), { maxKeys: eventAttrs.length, size }) : fc.constant({}),
    idempotencyKey: options.idempotency ? fc.option(fc.constantFrom('k1', 'k2', 'k3', 'k4'), { nil: undefined }) : fc.constant(undefined),
    gapMs: fc.integer({ min: 0, max: options.maxGapMs ?? 3 * 86_400_000 }),
  });
  const list = fc.array(event, { minLength: options.minLength ?? 1, maxLength: options.maxLength ?? 30, size });
  return fc.tuple(zonesOf(users, zoneList(options.zones)), list).map(([zones, events]) =>
    events.map((e) => {
      const tz = zones[e.user];
      const out: ArbEvent = { metricKey: e.metric.metricKey, user: { id: users[e.user] as string, ...(tz ? { tz } : {}) }, value: e.metric.value, gapMs: e.gapMs, attributes: e.attributes };
      if (e.idempotencyKey !== undefined) out.idempotencyKey = e.idempotencyKey;
      return out;
    }),
  );
}

/** A deterministic id source for pure-core tests: `id-1`, `id-2`, ... */
export function sequentialIds(prefix = 'id'): () => string {
  let n = 0;
  return () => `${prefix}-${++n}`;
}

// ---------------------------------------------------------------------------------------------------------
// Configurations

/** Options of {@link arbConfig}: upper bounds of each section (lower bounds are 0, metrics 1). */
export interface ArbConfigOptions {
  /** At most this many metrics (default 3, at least 1 is generated). */
  maxMetrics?: number;
  /** At most this many attributes, event and user ones together (default 3). */
  maxAttributes?: number;
  /** At most this many achievements (default 5). */
  maxAchievements?: number;
  /** At most this many points systems (default 2). */
  maxPointsSystems?: number;
  /** At most this many triggers per points system (default 4). */
  maxTriggers?: number;
  /** At most this many leaderboards (default 3). */
  maxLeaderboards?: number;
  /** `true`: always a `streak` section; `false`: never; absent: sometimes. */
  streak?: boolean;
  /** fast-check's size of every list of the configuration (default `'max'`). */
  size?: ArbSize;
}

type AchievementIn = NonNullable<ConfigInput['achievements']>[number];
type PointsSystemIn = NonNullable<ConfigInput['pointsSystems']>[number];
type TriggerIn = NonNullable<PointsSystemIn['triggers']>[number];
type LeaderboardIn = NonNullable<ConfigInput['leaderboards']>[number];
type StreakIn = NonNullable<ConfigInput['streak']>;

const RESERVED = new Set(['__proto__', 'constructor', 'prototype']);
/** Keys every store must handle: ordinary words, Object.prototype members, the punctuation keys allow. */
const KEY_WORDS = ['lessons', 'quiz', 'xp', 'coins', 'toString', 'valueOf', 'hasOwnProperty', 'a.b', 'x:y-z', '0', 'A_1'];
// Built once: fast-check compiles a `stringMatching` regex at every construction, and configurations build many key lists.
let keyArbitrary: fc.Arbitrary<string> | null = null;
const arbKey = (): fc.Arbitrary<string> =>
  (keyArbitrary ??= fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...KEY_WORDS) }, { weight: 1, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9_.:-]{0,11}$/, { size: DEFAULT_SIZE }) }).filter((k) => !RESERVED.has(k)));
const uniqueKeys = (minLength: number, maxLength: number, size: ArbSize): fc.Arbitrary<string[]> => fc.uniqueArray(arbKey(), { minLength, maxLength: Math.max(minLength, maxLength), size });
const arbName = (): fc.Arbitrary<string> => fc.constantFrom('Lessons', 'Quizzes ✓', '😀 Streak', 'Ünïcode', 'A');

/** A local date `days` days after `base` (YYYY-MM-DD). */
const plusDays = (base: string, days: number): string => new Date(Date.parse(`${base}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
const arbDate = (base: string, maxDays: number): fc.Arbitrary<string> => fc.integer({ min: 0, max: maxDays }).map((d) => plusDays(base, d));

/** A filter over some of `attrs` (values `a`/`b`), or none. */
const arbFilter = (attrs: readonly string[], size: ArbSize): fc.Arbitrary<Record<string, string> | undefined> =>
  attrs.length === 0
    ? fc.constant(undefined)
    : fc.option(fc.dictionary(fc.constantFrom(...attrs), fc.constantFrom('a', 'b'), { minKeys: 1, maxKeys: Math.min(2, attrs.length), size }), { nil: undefined, freq: 3 });
const arbThreshold = (): fc.Arbitrary<number> => fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 10 }) }, { weight: 1, arbitrary: fc.constantFrom(0.5, 2.5, 100) });
const omitUndefined = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

/**
 * Whole configurations that `defineConfig` accepts: metrics, event and user attributes, achievements of
 * every trigger (metric with attribute filters, streak, api, composite without cycles), statuses, an
 * optional streak (frequency, metrics, freezes with auto-earn, customization), points systems (levels,
 * triggers of every type, boosts, caps, negative balances), leaderboards of every `rankBy` (runs, windows,
 * zones, breakdowns), notifications and an experiment. Keys are unique where the schema wants them to be.
 * Generates the input: compile it with `defineConfig`.
 * @example
 * ```ts
 * fc.assert(fc.property(arbConfig(), (input) => { const config = defineConfig(input); ... }));
 * ```
 */
export function arbConfig(options: ArbConfigOptions = {}): fc.Arbitrary<ConfigInput> {
  const size = options.size ?? DEFAULT_SIZE;
  const metrics = uniqueKeys(1, options.maxMetrics ?? 3, size);
  const attributes = fc
    .uniqueArray(arbKey(), { maxLength: options.maxAttributes ?? 3, size })
    .chain((keys) => fc.tuple(...keys.map((key) => fc.constantFrom('event' as const, 'user' as const).map((type) => ({ key, type })))));
  const base = fc.record({ metrics, attributes, streak: options.streak === undefined ? fc.boolean() : fc.constant(options.streak) });
  return base.chain(({ metrics: metricKeys, attributes: attrs, streak: hasStreak }) => {
    const eventAttrs = attrs.filter((a) => a.type === 'event').map((a) => a.key);
    const userAttrs = attrs.filter((a) => a.type === 'user').map((a) => a.key);
    const metric = fc.constantFrom(...metricKeys);
    const achievements = uniqueKeys(0, options.maxAchievements ?? 5, size).chain((keys) =>
      fc.tuple(
        ...keys.map((key, i) =>
          fc
            .record({
              trigger: fc.constantFrom(...(['metric', 'metric', 'api', 'achievement', ...(hasStreak ? (['streak'] as const) : [])] as const)),
              metricKey: metric,
              metricValue: arbThreshold(),
              streakLength: fc.integer({ min: 1, max: 10 }),
              prerequisites: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3, size }),
              userAttributes: arbFilter(userAttrs, size),
              eventAttributes: arbFilter(eventAttrs, size),
              status: fc.constantFrom('active', 'active', 'active', 'active', 'inactive', 'locked'),
              name: arbName(),
            })
            .map((a): AchievementIn => {
              const common = omitUndefined({ key, name: a.name, userAttributes: a.userAttributes, ...(a.status === 'active' ? {} : { status: a.status as 'inactive' | 'locked' }) });
              // A composite requires earlier achievements only, so prerequisites never form a cycle.
              if (a.trigger === 'achievement' && i > 0) return { ...common, trigger: 'achievement', achievementKeys: [...new Set(a.prerequisites.map((p) => keys[p % i] as string))] };
              if (a.trigger === 'metric') return omitUndefined({ ...common, trigger: 'metric' as const, metricKey: a.metricKey, metricValue: a.metricValue, eventAttributes: a.eventAttributes });
              if (a.trigger === 'streak') return { ...common, trigger: 'streak', streakLength: a.streakLength };
              return { ...common, trigger: 'api' };
            }),
        ),
      ),
    );
    const streak: fc.Arbitrary<StreakIn | undefined> = hasStreak
      ? fc
          .record({
            frequency: fc.constantFrom('daily' as const, 'daily' as const, 'weekly' as const, 'monthly' as const),
            metrics: fc.option(fc.uniqueArray(fc.record({ key: metric, threshold: arbThreshold() }), { minLength: 1, maxLength: metricKeys.length, selector: (m) => m.key, size }), { nil: undefined }),
            mode: fc.constantFrom('any' as const, 'all' as const),
            freezes: fc.option(
              fc.record({ max: fc.integer({ min: 0, max: 5 }), initial: fc.integer({ min: 0, max: 5 }), autoEarn: fc.option(fc.record({ everyDays: fc.integer({ min: 1, max: 7 }), amount: fc.integer({ min: 1, max: 2 }) }), { nil: undefined }) }),
              { nil: undefined },
            ),
            customization: fc.option(
              fc.record({ metrics: fc.uniqueArray(metric, { minLength: 1, maxLength: metricKeys.length, size }), minThreshold: fc.option(fc.constantFrom(0.5, 1, 2), { nil: undefined }), maxThreshold: fc.option(fc.constantFrom(2, 10), { nil: undefined }) }),
              { nil: undefined, freq: 3 },
            ),
          })
          .map((s) =>
            omitUndefined({
              ...s,
              freezes: s.freezes ? omitUndefined({ max: s.freezes.max, initial: Math.min(s.freezes.initial, s.freezes.max), autoEarn: s.freezes.autoEarn }) : undefined,
              customization: s.customization ? omitUndefined(s.customization) : undefined,
            }),
          )
      : fc.constant(undefined);
    return fc.record({ achievements, streak }).chain(({ achievements: achievementList, streak: streakSection }) => {
      const achievementKeys = achievementList.map((a) => a.key);
      const triggerTypes = ['metric', 'metric', 'user_creation', 'time', ...(hasStreak ? (['streak'] as const) : []), ...(achievementKeys.length ? (['achievement'] as const) : [])] as const;
      const trigger = (key: string): fc.Arbitrary<TriggerIn> =>
        fc
          .record({
            type: fc.constantFrom(...triggerTypes),
            points: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 100 }) }, { weight: 1, arbitrary: fc.integer({ min: -20, max: -1 }) }),
            metricKey: metric,
            metricThreshold: arbThreshold(),
            achievementKey: achievementKeys.length ? fc.constantFrom(...achievementKeys) : fc.constant(''),
            streakLengthThreshold: fc.integer({ min: 1, max: 7 }),
            timeUnit: fc.constantFrom('hour' as const, 'day' as const),
            timeInterval: fc.integer({ min: 1, max: 12 }),
            anchor: fc.option(fc.constantFrom('created' as const, 'lastSpend' as const), { nil: undefined }),
            block: fc.boolean(),
            userAttributes: arbFilter(userAttrs, size),
            eventAttributes: arbFilter(eventAttrs, size),
          })
          .map((t): TriggerIn => {
            const block = t.points < 0 && t.block ? { blockIfOutOfPoints: true } : {};
            const common = omitUndefined({ key, points: t.points, userAttributes: t.userAttributes });
            switch (t.type) {
              case 'metric':
                return omitUndefined({ ...common, ...block, type: 'metric' as const, metricKey: t.metricKey, metricThreshold: t.metricThreshold, eventAttributes: t.eventAttributes });
              case 'streak':
                return { ...common, ...block, type: 'streak', streakLengthThreshold: t.streakLengthThreshold };
              case 'achievement':
                return { ...common, ...block, type: 'achievement', achievementKey: t.achievementKey };
              case 'user_creation':
                return { ...common, points: Math.abs(t.points), type: 'user_creation' };
              default:
                return omitUndefined({ ...common, points: Math.abs(t.points), type: 'time' as const, timeUnit: t.timeUnit, timeInterval: t.timeUnit === 'day' ? Math.min(t.timeInterval, 3) : t.timeInterval, anchor: t.anchor });
            }
          });
      const pointsSystem = (key: string): fc.Arbitrary<PointsSystemIn> =>
        fc
          .record({
            name: arbName(),
            maxPoints: fc.option(fc.constantFrom(3, 50, 1000), { nil: undefined, freq: 3 }),
            allowNegative: fc.boolean(),
            levels: uniqueKeys(0, 4, size).chain((keys) => fc.tuple(...keys.map(() => fc.integer({ min: 1, max: 60 }))).map((steps) => keys.map((k, i) => ({ key: k, name: `Level ${i + 1}`, points: steps.slice(0, i).reduce((s, n) => s + n, 0) })))),
            triggers: uniqueKeys(0, options.maxTriggers ?? 4, size).chain((keys) => fc.tuple(...keys.map(trigger))),
            boosts: uniqueKeys(0, 2, size).chain((keys) =>
              fc.tuple(
                ...keys.map((k) =>
                  fc
                    .record({ start: arbDate('2025-06-01', 540), days: fc.option(fc.integer({ min: 0, max: 60 }), { nil: null }), multiplier: fc.constantFrom(0.5, 1.5, 2, 3), rounding: fc.constantFrom('down' as const, 'up' as const, 'nearest' as const), userAttributes: arbFilter(userAttrs, size) })
                    .map((b) => omitUndefined({ key: k, name: `Boost ${k}`, start: b.start, end: b.days === null ? null : plusDays(b.start, b.days), multiplier: b.multiplier, rounding: b.rounding, userAttributes: b.userAttributes })),
                ),
              ),
            ),
          })
          .map((p) => omitUndefined({ key, ...p, maxPoints: p.maxPoints }));
      const pointsSystems = uniqueKeys(0, options.maxPointsSystems ?? 2, size).chain((keys) => fc.tuple(...keys.map(pointsSystem)));
      return pointsSystems.chain((systems) => {
        const systemKeys = systems.map((s) => s.key);
        const rankBys = ['metric', ...(systemKeys.length ? (['points'] as const) : []), ...(hasStreak ? (['streak'] as const) : [])] as const;
        const WINDOWS: readonly (readonly [string | undefined, string | undefined])[] = [[undefined, undefined], [undefined, undefined], ['06:00', '18:00'], ['22:00', '02:00'], [undefined, '12:00'], ['08:30:15', undefined]];
        const leaderboard = (key: string): fc.Arbitrary<LeaderboardIn> =>
          fc
            .record({
              rankBy: fc.constantFrom(...rankBys),
              name: arbName(),
              metricKey: metric,
              pointsSystemKey: systemKeys.length ? fc.constantFrom(...systemKeys) : fc.constant(''),
              start: arbDate('2025-01-01', 540),
              endDays: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined, freq: 3 }),
              run: fc.option(fc.record({ runUnit: fc.constantFrom('day' as const, 'month' as const, 'year' as const), runInterval: fc.option(fc.integer({ min: 1, max: 14 }), { nil: undefined }) }), { nil: undefined }),
              maxParticipants: fc.option(fc.constantFrom(1, 3, 1000), { nil: undefined }),
              timeZone: fc.option(arbTimeZone(), { nil: undefined }),
              breakdownAttributes: userAttrs.length ? fc.option(fc.uniqueArray(fc.constantFrom(...userAttrs), { minLength: 1, maxLength: userAttrs.length, size }), { nil: undefined, freq: 3 }) : fc.constant(undefined),
              window: fc.constantFrom(...WINDOWS),
              status: fc.constantFrom('active', 'active', 'active', 'active', 'inactive'),
            })
            .map((b) => {
              const streakBoard = b.rankBy === 'streak';
              return omitUndefined({
                key,
                name: b.name,
                rankBy: b.rankBy,
                metricKey: b.rankBy === 'metric' ? b.metricKey : undefined,
                pointsSystemKey: b.rankBy === 'points' ? b.pointsSystemKey : undefined,
                start: b.start,
                end: b.endDays === undefined ? undefined : plusDays(b.start, b.endDays),
                runUnit: streakBoard ? undefined : b.run?.runUnit,
                runInterval: streakBoard ? undefined : b.run?.runInterval,
                maxParticipants: b.maxParticipants,
                timeZone: b.timeZone,
                breakdownAttributes: b.breakdownAttributes,
                startTime: streakBoard ? undefined : b.window[0],
                endTime: streakBoard ? undefined : b.window[1],
                status: b.status === 'active' ? undefined : ('inactive' as const),
              });
            });
        const notifications = fc.option(
          fc.record({
            streakReminder: fc.option(fc.record({ hoursBefore: fc.integer({ min: 1, max: 168 }) }), { nil: undefined }),
            reactivation: fc.option(fc.uniqueArray(fc.integer({ min: 1, max: 60 }), { minLength: 1, maxLength: 4, size }).map((days) => ({ days: [...days].sort((a, b) => a - b) })), { nil: undefined }),
            recap: fc.option(fc.record({ frequency: fc.constantFrom('daily' as const, 'weekly' as const, 'monthly' as const) }), { nil: undefined }),
            achievement: fc.option(fc.constant({}), { nil: undefined }),
            leaderboardChangedMinutes: fc.option(fc.integer({ min: 1, max: 60 }), { nil: undefined }),
          }).map(omitUndefined),
          { nil: undefined },
        );
        return fc
          .record({
            timeZone: fc.option(arbTimeZone(), { nil: undefined }),
            weekStartsOn: fc.option(fc.constantFrom(0, 1, 2, 3, 4, 5, 6) as fc.Arbitrary<0 | 1 | 2 | 3 | 4 | 5 | 6>, { nil: undefined }),
            leaderboards: uniqueKeys(0, options.maxLeaderboards ?? 3, size).chain((keys) => fc.tuple(...keys.map(leaderboard))),
            notifications,
            experiment: fc.option(fc.record({ controlRatio: fc.constantFrom(0, 0.25, 0.5, 1) }), { nil: undefined, freq: 4 }),
          })
          .map(
            (rest): ConfigInput =>
              omitUndefined({
                timeZone: rest.timeZone,
                weekStartsOn: rest.weekStartsOn,
                metrics: metricKeys.map((key, i) => ({ key, name: `Metric ${i + 1}` })),
                attributes: attrs.map((a) => ({ key: a.key, name: `Attribute ${a.key}`, type: a.type })),
                achievements: achievementList,
                streak: streakSection,
                pointsSystems: systems,
                leaderboards: rest.leaderboards,
                notifications: rest.notifications,
                experiment: rest.experiment,
              }),
          );
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// Scenarios: events and operator actions over time

/** An event of a scenario step (the arguments of `recordEvent`, or one entry of `recordEvents`): a {@link BatchEvent}. */
export type ScenarioEvent = BatchEvent;

/** What a `read` step reads (the argument `key` names the board, system or metric it needs). */
export type ScenarioRead = 'profile' | 'streak' | 'points' | 'leaderboard' | 'userLeaderboard' | 'achievements' | 'events' | 'metricSummary';

/**
 * One engine call of a scenario, discriminated by `kind` (the engine method it calls). Dates that must be
 * in the future are relative (`startInDays` after the step's UTC date, see {@link runScenarioStep});
 * `deletePause`/`deleteBoost` delete the user's first pause/runtime boost of the system (an unknown id when there
 * is none).
 */
export type ScenarioStep =
  | { kind: 'recordEvent'; event: ScenarioEvent }
  | { kind: 'recordEvents'; events: ScenarioEvent[] }
  | { kind: 'identifyUser'; user: UserInput }
  | { kind: 'updateUser'; userId: string; patch: Omit<UserInput, 'id'> }
  | { kind: 'completeAchievement'; achievementKey: string; user: UserInput }
  | { kind: 'accrue'; userId: string }
  | { kind: 'grantFreezes'; userId: string; count: number; idempotencyKey?: string }
  | { kind: 'restoreStreak'; userId: string }
  | { kind: 'pauseStreak'; userId: string; startInDays: number; days: number }
  | { kind: 'deletePause'; userId: string }
  | { kind: 'updatePreferences'; userId: string; preferences: PreferencesPatch }
  | { kind: 'adjustPoints'; userId: string; systemKey: string; amount: number; reason?: string; idempotencyKey?: string }
  | { kind: 'createBoost'; userId: string; systemKey: string; name: string; startInDays: number; days: number | null; multiplier: number; rounding: 'down' | 'up' | 'nearest' }
  | { kind: 'deleteBoost'; userId: string; systemKey: string }
  | { kind: 'resetUser'; userId: string }
  | { kind: 'deleteUser'; userId: string }
  | { kind: 'sweep' }
  | { kind: 'read'; read: ScenarioRead; userId: string; key?: string };

/** A step of a timed scenario: the engine's clock reads `at` while the step runs. */
export interface TimedStep {
  at: Date;
  step: ScenarioStep;
}

/** Options of {@link arbAction} and {@link arbScenario}. */
export interface ArbScenarioOptions {
  /** The user pool (default `u1`..`u4`): small, so users repeat. */
  users?: readonly string[];
  /** Users' zones (default `true`: {@link TIME_ZONES}; `false`: users without a zone), one per user per scenario. */
  zones?: boolean | readonly string[];
  /** Per-metric value ranges; other metrics get positive values (see {@link arbValue}). */
  values?: Readonly<Record<string, ValueRange>>;
  /** Decimal places of values without a range (default 2). */
  decimals?: number;
  /** Negative values for metrics without a range (default false). */
  allowNegative?: boolean;
  /** Idempotency keys of events and operations, from this small pool so that some repeat (default `k1`..`k3`). */
  idempotencyKeys?: readonly string[];
  /** Operator actions besides events, identify and reads (default true). */
  operations?: boolean;
  /** Read steps in the stream (default true). */
  reads?: boolean;
  /** At least this many steps (default 1). */
  minSteps?: number;
  /** At most this many steps (default 40), reached with the default `size`. */
  maxSteps?: number;
  /** fast-check's size of the step list and of batches (default `'max'`). */
  size?: ArbSize;
  /** Range of the first instant (default 2025-06-01 to 2026-12-01, often just before a DST change or a month's end). */
  from?: string;
  to?: string;
  /** Largest gap between two steps (default 45 days). */
  maxGapMs?: number;
}

const DEFAULT_USERS = ['u1', 'u2', 'u3', 'u4'];
/** Instants just before DST changes (EU, US, Lord Howe), month, week and year ends. */
const EDGE_STARTS = ['2026-03-28T22:30:00Z', '2026-03-08T05:00:00Z', '2026-10-24T23:00:00Z', '2026-11-01T04:30:00Z', '2026-04-04T14:00:00Z', '2025-12-31T20:00:00Z', '2026-01-31T22:00:00Z', '2026-02-28T23:59:00Z', '2026-01-04T23:00:00Z'];

/**
 * One operator or user action valid for `config` (mostly: a few are refused the way real callers get
 * refused, e.g. a spend the balance cannot cover): events and batches, identify and updates (attributes,
 * zone), completions of `api` achievements, accrual, streak freezes, restores, pauses and preferences when
 * the configuration has a streak, points adjustments and runtime boosts when it has points systems,
 * resets and erasure, sweeps, and reads.
 */
export function arbAction(config: LaurelConfig, options: ArbScenarioOptions = {}): fc.Arbitrary<ScenarioStep> {
  return actionFor(config, options, (options.users ?? DEFAULT_USERS).map(() => undefined));
}

function actionFor(config: LaurelConfig, options: ArbScenarioOptions, zones: readonly (string | undefined)[]): fc.Arbitrary<ScenarioStep> {
  const users = options.users ?? DEFAULT_USERS;
  if (users.length === 0) throw new RangeError('users: the pool must not be empty');
  checkRanges(options.values, options.decimals);
  const size = options.size ?? DEFAULT_SIZE;
  const keys = options.idempotencyKeys ?? ['k1', 'k2', 'k3'];
  const idempotencyKey = keys.length ? fc.option(fc.constantFrom(...keys), { nil: undefined, freq: 2 }) : fc.constant(undefined);
  const userAttrs = [...config.index.userAttributes];
  const eventAttrs = [...config.index.eventAttributes];
  // Zones an update may move a user to (a change of zone mid-scenario), none when zones are off.
  const zoneChoices = zoneList(options.zones ?? true);
  const userIndex = fc.integer({ min: 0, max: users.length - 1 });
  const userId = userIndex.map((i) => users[i] as string);
  const attrs = (list: readonly string[]) => (list.length ? fc.dictionary(fc.constantFrom(...list), fc.constantFrom('a', 'b'), { maxKeys: list.length, size }) : fc.constant({}));
  // A user as sent with a call: the zone of the scenario (sometimes left out), sometimes attributes.
  const userInput = fc.record({ i: userIndex, withTz: fc.boolean(), attributes: fc.option(attrs(userAttrs), { nil: undefined, freq: 3 }) }).map(({ i, withTz, attributes }): UserInput => {
    const tz = zones[i];
    return { id: users[i] as string, ...(tz && withTz ? { tz } : {}), ...(attributes && Object.keys(attributes).length ? { attributes } : {}) };
  });
  const event: fc.Arbitrary<ScenarioEvent> = fc
    .record({
      metric: fc.constantFrom(...config.metrics.map((m) => m.key)).chain((metricKey) => metricValue(metricKey, options).map((value) => ({ metricKey, value }))),
      user: userInput,
      attributes: attrs(eventAttrs),
      idempotencyKey,
    })
    .map((e) => ({ metricKey: e.metric.metricKey, user: e.user, value: e.metric.value, ...(Object.keys(e.attributes).length ? { attributes: e.attributes } : {}), ...(e.idempotencyKey ? { idempotencyKey: e.idempotencyKey } : {}) }));
  const weighted: fc.WeightedArbitrary<ScenarioStep>[] = [
    { weight: 12, arbitrary: event.map((e): ScenarioStep => ({ kind: 'recordEvent', event: e })) },
    { weight: 2, arbitrary: fc.array(event, { minLength: 1, maxLength: 5, size }).map((events): ScenarioStep => ({ kind: 'recordEvents', events })) },
    { weight: 2, arbitrary: userInput.map((user): ScenarioStep => ({ kind: 'identifyUser', user })) },
    {
      weight: 1,
      arbitrary: fc
        .record({ i: userIndex, tz: zoneChoices.length ? fc.option(fc.constantFrom(...zoneChoices), { nil: undefined }) : fc.constant(undefined), attributes: attrs(userAttrs), name: fc.option(arbName(), { nil: undefined }) })
        .map(({ i, tz, attributes, name }): ScenarioStep => ({ kind: 'updateUser', userId: users[i] as string, patch: { ...(tz ? { tz } : {}), ...(Object.keys(attributes).length ? { attributes } : {}), ...(name ? { name } : {}) } })),
    },
    { weight: 1, arbitrary: userId.map((id): ScenarioStep => ({ kind: 'accrue', userId: id })) },
    { weight: 1, arbitrary: fc.constant<ScenarioStep>({ kind: 'sweep' }) },
  ];
  const achievements = config.achievements.filter((a) => a.trigger === 'api').map((a) => a.key);
  if (config.achievements.length > 0) {
    // Mostly `api` achievements; sometimes another kind, which completeAchievement refuses.
    const key = achievements.length ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...achievements) }, { weight: 1, arbitrary: fc.constantFrom(...config.achievements.map((a) => a.key)) }) : fc.constantFrom(...config.achievements.map((a) => a.key));
    weighted.push({ weight: 2, arbitrary: fc.record({ achievementKey: key, user: userInput }).map((c): ScenarioStep => ({ kind: 'completeAchievement', ...c })) });
  }
  if (options.reads !== false) {
    const reads: fc.Arbitrary<ScenarioStep>[] = [fc.record({ read: fc.constantFrom('profile' as const, 'achievements' as const, 'events' as const), userId }).map((r): ScenarioStep => ({ kind: 'read', ...r }))];
    reads.push(fc.record({ userId, key: fc.constantFrom(...config.metrics.map((m) => m.key)) }).map((r): ScenarioStep => ({ kind: 'read', read: 'metricSummary', ...r })));
    if (config.streak) reads.push(userId.map((id): ScenarioStep => ({ kind: 'read', read: 'streak', userId: id })));
    if (config.pointsSystems.length) reads.push(fc.record({ userId, key: fc.constantFrom(...config.pointsSystems.map((p) => p.key)) }).map((r): ScenarioStep => ({ kind: 'read', read: 'points', ...r })));
    if (config.leaderboards.length) {
      reads.push(fc.record({ userId, key: fc.constantFrom(...config.leaderboards.map((b) => b.key)), read: fc.constantFrom('leaderboard' as const, 'userLeaderboard' as const) }).map((r): ScenarioStep => ({ kind: 'read', ...r })));
    }
    weighted.push({ weight: 3, arbitrary: fc.oneof(...reads) });
  }
  if (options.operations !== false) {
    weighted.push({ weight: 1, arbitrary: userId.map((id): ScenarioStep => ({ kind: 'resetUser', userId: id })) });
    weighted.push({ weight: 1, arbitrary: userId.map((id): ScenarioStep => ({ kind: 'deleteUser', userId: id })) });
    if (config.streak) {
      // Freezes only when configured (grantFreezes refuses them otherwise).
      if (config.streak.freezes) {
        weighted.push({ weight: 1, arbitrary: fc.record({ userId, count: fc.integer({ min: 1, max: 3 }), idempotencyKey }).map((g): ScenarioStep => ({ kind: 'grantFreezes', userId: g.userId, count: g.count, ...(g.idempotencyKey ? { idempotencyKey: g.idempotencyKey } : {}) })) });
      }
      weighted.push(
        { weight: 1, arbitrary: userId.map((id): ScenarioStep => ({ kind: 'restoreStreak', userId: id })) },
        { weight: 1, arbitrary: fc.record({ userId, startInDays: fc.integer({ min: 0, max: 5 }), days: fc.integer({ min: 0, max: 6 }) }).map((p): ScenarioStep => ({ kind: 'pauseStreak', ...p })) },
        { weight: 1, arbitrary: userId.map((id): ScenarioStep => ({ kind: 'deletePause', userId: id })) },
        {
          weight: 1,
          arbitrary: fc.record({ userId, enabled: fc.option(fc.boolean(), { nil: undefined }), recap: fc.option(fc.constantFrom<('email' | 'push')[]>([], ['email'], ['email', 'push']), { nil: undefined }) }).map(
            (p): ScenarioStep => ({ kind: 'updatePreferences', userId: p.userId, preferences: { ...(p.enabled === undefined ? {} : { streak: { enabled: p.enabled } }), ...(p.recap === undefined ? {} : { notifications: { recap: p.recap } }) } }),
          ),
        },
      );
    }
    if (config.pointsSystems.length) {
      const system = fc.constantFrom(...config.pointsSystems.map((p) => p.key));
      weighted.push(
        {
          weight: 2,
          arbitrary: fc.record({ userId, systemKey: system, amount: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: -60, max: -1 })), reason: fc.option(fc.constantFrom('shop', 'bonus'), { nil: undefined }), idempotencyKey }).map(
            (a): ScenarioStep => ({ kind: 'adjustPoints', userId: a.userId, systemKey: a.systemKey, amount: a.amount, ...(a.reason ? { reason: a.reason } : {}), ...(a.idempotencyKey ? { idempotencyKey: a.idempotencyKey } : {}) }),
          ),
        },
        {
          weight: 2,
          arbitrary: fc
            .record({ userId, systemKey: system, startInDays: fc.integer({ min: 0, max: 3 }), days: fc.option(fc.integer({ min: 0, max: 10 }), { nil: null }), multiplier: fc.constantFrom(0.5, 2, 3), rounding: fc.constantFrom('down' as const, 'up' as const, 'nearest' as const) })
            .map((b): ScenarioStep => ({ kind: 'createBoost', name: 'Boost', ...b })),
        },
        { weight: 1, arbitrary: fc.record({ userId, systemKey: system }).map((d): ScenarioStep => ({ kind: 'deleteBoost', ...d })) },
      );
    }
  }
  return fc.oneof(...weighted);
}

/** Gaps between steps: some zero (calls at one instant), mostly short, some of hours, some crossing days, a few of weeks. */
const arbGap = (maxGapMs: number): fc.Arbitrary<number> =>
  fc
    .oneof(
      { weight: 2, arbitrary: fc.constant(0) },
      { weight: 6, arbitrary: fc.integer({ min: 0, max: 60_000 }) },
      { weight: 5, arbitrary: fc.integer({ min: 60_000, max: 6 * 3_600_000 }) },
      { weight: 4, arbitrary: fc.integer({ min: 6 * 3_600_000, max: 36 * 3_600_000 }) },
      { weight: 2, arbitrary: fc.integer({ min: 36 * 3_600_000, max: 10 * 86_400_000 }) },
      { weight: 1, arbitrary: fc.integer({ min: 10 * 86_400_000, max: 45 * 86_400_000 }) },
    )
    .map((gap) => Math.min(gap, maxGapMs));

/**
 * A timed stream of steps for `config`: events and actions (see {@link arbAction}) at non-decreasing
 * instants, from a start often just before a DST change or the end of a month or year, with gaps from
 * zero (equal instants) to weeks, so that days, periods, DST changes, streak deadlines and board runs are
 * crossed. Users come from a small pool (each with one zone when `zones` is on), and idempotency keys from a
 * small pool, so both repeat. The number of steps honours `minSteps`/`maxSteps` exactly.
 * @example
 * ```ts
 * fc.assert(fc.asyncProperty(arbScenario(config), async (steps) => {
 *   let now = steps[0]?.at ?? new Date();
 *   const engine = createEngine({ config, store: createMemoryStore(), clock: () => now });
 *   for (const { at, step } of steps) { now = at; await runScenarioStep(engine, step, at).catch(() => {}); }
 * }));
 * ```
 */
export function arbScenario(config: LaurelConfig, options: ArbScenarioOptions = {}): fc.Arbitrary<TimedStep[]> {
  const users = options.users ?? DEFAULT_USERS;
  const size = options.size ?? DEFAULT_SIZE;
  const from = options.from ?? '2025-06-01T00:00:00Z';
  const to = options.to ?? '2026-12-01T00:00:00Z';
  const start = options.from === undefined && options.to === undefined ? fc.oneof({ weight: 1, arbitrary: fc.constantFrom(...EDGE_STARTS).map((s) => new Date(s)) }, { weight: 2, arbitrary: arbInstant(from, to) }) : arbInstant(from, to);
  const zones = zonesOf(users, zoneList(options.zones ?? true));
  return fc.tuple(start, zones).chain(([first, userZones]) =>
    fc.array(fc.tuple(arbGap(options.maxGapMs ?? 45 * 86_400_000), actionFor(config, options, userZones)), { minLength: options.minSteps ?? 1, maxLength: options.maxSteps ?? 40, size }).map((list) => {
      let ms = first.getTime();
      return list.map(([gap, step], i): TimedStep => {
        if (i > 0) ms += gap;
        return { at: new Date(ms), step };
      });
    }),
  );
}

/** The UTC date `days` days after the date of `at`. */
const dateAfter = (at: Date, days: number): string => new Date(at.getTime() + days * 86_400_000).toISOString().slice(0, 10);

/**
 * Plays one step on an engine (whose clock should read `at`) and returns what the engine answered; throws
 * what it throws. Relative dates resolve against the UTC date of `at`. A `recordEvents` step answers each
 * event's result with its error reduced to `{ error: code }`; an `events` read answers the first two pages of
 * the user's events without their cursors (opaque and each store's own): `{ pages, more }`.
 */
export async function runScenarioStep(engine: Engine, step: ScenarioStep, at: Date): Promise<unknown> {
  switch (step.kind) {
    case 'recordEvent': {
      const { metricKey, idempotencyKey, ...request } = step.event;
      return engine.recordEvent(metricKey, request, idempotencyKey === undefined ? {} : { idempotencyKey });
    }
    case 'recordEvents':
      return (await engine.recordEvents(step.events)).map((r) => (r.ok ? { ok: r.response } : { error: r.error.code }));
    case 'identifyUser':
      return engine.identifyUser(step.user);
    case 'updateUser':
      return engine.updateUser(step.userId, step.patch);
    case 'completeAchievement':
      return engine.completeAchievement(step.achievementKey, { user: step.user });
    case 'accrue':
      return engine.accrue(step.userId);
    case 'grantFreezes':
      return engine.grantFreezes(step.userId, step.count, step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey });
    case 'restoreStreak':
      return engine.restoreStreak(step.userId);
    case 'pauseStreak':
      return engine.pauseStreak(step.userId, { start: dateAfter(at, step.startInDays), end: dateAfter(at, step.startInDays + step.days) });
    case 'deletePause': {
      const [pause] = (await engine.getStreak(step.userId)).pauses;
      return engine.deletePause(step.userId, pause?.id ?? 'no-such-pause');
    }
    case 'updatePreferences':
      return engine.updatePreferences(step.userId, step.preferences);
    case 'adjustPoints':
      return engine.adjustPoints(step.userId, step.systemKey, step.amount, { ...(step.reason === undefined ? {} : { reason: step.reason }), ...(step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey }) });
    case 'createBoost':
      return engine.createBoost({ pointsSystemKey: step.systemKey, userId: step.userId, name: step.name, start: dateAfter(at, step.startInDays), end: step.days === null ? null : dateAfter(at, step.startInDays + step.days), multiplier: step.multiplier, rounding: step.rounding });
    case 'deleteBoost': {
      const own = (await engine.listBoosts(step.systemKey, { includeFinished: true })).filter((b) => b.userId === step.userId);
      return engine.deleteBoost(own[0]?.id ?? 'no-such-boost');
    }
    case 'resetUser':
      return engine.resetUser(step.userId);
    case 'deleteUser':
      return engine.deleteUser(step.userId);
    case 'sweep':
      return engine.sweep();
    case 'read':
      return readStep(engine, step, at);
  }
}

async function readStep(engine: Engine, step: Extract<ScenarioStep, { kind: 'read' }>, at: Date): Promise<unknown> {
  const key = step.key ?? '';
  switch (step.read) {
    case 'profile':
      return engine.getProfile(step.userId);
    case 'streak':
      return engine.getStreak(step.userId, { historyPeriods: 10 });
    case 'points':
      return engine.getPointsSummary(step.userId, key, { awards: 20 });
    case 'leaderboard': {
      const board = engine.config.index.leaderboards.get(key);
      return engine.getLeaderboard(key, board && board.breakdownAttributes.length > 0 ? { userId: step.userId, offset: -2, limit: 5 } : { limit: 20 });
    }
    case 'userLeaderboard':
      return engine.getUserLeaderboard(step.userId, key, { numEvents: 5 });
    case 'achievements':
      return engine.getUserAchievements(step.userId, { includeIncomplete: true });
    case 'metricSummary':
      return engine.getMetricEventSummary(step.userId, key, { aggregation: 'daily', startDate: dateAfter(at, -20), endDate: dateAfter(at, 1) });
    case 'events': {
      const first = await engine.getUserEvents(step.userId, { limit: 3 });
      const second = first.next ? await engine.getUserEvents(step.userId, { before: first.next, limit: 3 }) : null;
      return { pages: [first.events, ...(second ? [second.events] : [])], more: second ? second.next !== null : false };
    }
  }
}
