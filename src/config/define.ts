/**
 * `defineConfig`: validates a configuration once with zod and compiles it into a frozen object with the
 * lookup indexes the per-event path needs (so no event ever scans the configuration for a key).
 */
import { ConfigError } from '../errors.js';
import type { Frequency, WeekStart } from '../core/calendar.js';
import { stableId } from '../core/ids.js';
import { DEVELOPMENT } from '../core/mode.js';
import {
  configSchema,
  type AchievementConfig,
  type ConfigInput,
  type LeaderboardConfig,
  type PointsTriggerConfig,
} from './schema.js';

/** The key names a configuration declares, carried as literal types for compile-time checks. */
export interface ConfigKeys {
  /** The metrics' keys. */
  metric: string;
  /** The achievements' keys. */
  achievement: string;
  /** The points systems' keys. */
  points: string;
  /** The leaderboards' keys. */
  leaderboard: string;
}

/**
 * The `key`s of the entries of section `F` (`metrics`, `achievements`, ...) of a configuration input `T`:
 * literal when `T` kept them, `string` when it was widened, `never` when the section is absent or empty.
 */
export type KeysOfSection<T, F extends string> = T extends { readonly [P in F]?: readonly (infer E)[] }
  ? E extends { readonly key: infer K extends string }
    ? K
    : never
  : never;

/** Literal key types of a configuration input. */
export interface KeysOf<T> extends ConfigKeys {
  metric: KeysOfSection<T, 'metrics'>;
  achievement: KeysOfSection<T, 'achievements'>;
  points: KeysOfSection<T, 'pointsSystems'>;
  leaderboard: KeysOfSection<T, 'leaderboards'>;
}

/**
 * Attribute values an achievement or trigger requires (key to value); empty: no requirement.
 *
 * @inline
 */
export type Filter = Readonly<Record<string, string>>;

/** A metric of a compiled configuration ({@link LaurelConfig.metrics}): its id, key and name. */
export interface CompiledMetric {
  readonly id: string;
  readonly key: string;
  readonly name: string;
}

/**
 * A declared attribute of a compiled configuration: an event attribute (sent with each event) or a user
 * attribute (kept on the user).
 *
 * @inline
 */
export interface CompiledAttribute {
  readonly id: string;
  readonly key: string;
  readonly name: string;
  readonly type: 'event' | 'user';
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * An achievement of a compiled configuration ({@link LaurelConfig.achievements}): the validated definition with
 * its id, its position in the configuration (`index`), its filters and, for metric and composite achievements,
 * the ids and names they refer to.
 */
export type CompiledAchievement = Readonly<
  DistributiveOmit<AchievementConfig, 'description' | 'badgeUrl' | 'userAttributes'> & {
    id: string;
    index: number;
    description: string | null;
    badgeUrl: string | null;
    userAttributes: Filter;
    /** For metric achievements: the metric's id and name. */
    metricId?: string;
    metricName?: string;
    /** For composite achievements: the ids of the prerequisites. */
    achievementIds?: string[];
  }
>;

/**
 * The compiled `streak` section ({@link LaurelConfig.streak}): the period length, which events qualify a period,
 * freezes, and the guardrails of per-user streak rules.
 */
export interface CompiledStreak {
  readonly frequency: Frequency;
  /** null: any event with a positive value on any metric qualifies the period. */
  readonly metrics: readonly { key: string; threshold: number }[] | null;
  readonly mode: 'any' | 'all';
  readonly freezes: { readonly initial: number; readonly max: number; readonly autoEarn: { everyDays: number; amount: number } | null } | null;
  /** Guardrails of per-user streak rules; null: users may only turn their streak off and on. */
  readonly customization: { readonly metrics: readonly string[]; readonly minThreshold: number | null; readonly maxThreshold: number | null } | null;
}

/**
 * A trigger of a compiled points system: the validated definition with its id, its system's key and the ids
 * and names of the metric or achievement it fires on.
 */
export type CompiledTrigger = Readonly<
  PointsTriggerConfig & {
    id: string;
    systemKey: string;
    metricId?: string;
    metricName?: string;
    achievementId?: string;
    achievementName?: string;
  }
>;

/**
 * A level of a compiled points system, reached at `points` points.
 *
 * @inline
 */
export interface CompiledLevel {
  readonly id: string;
  readonly key: string;
  readonly name: string;
  readonly description: string;
  readonly badgeUrl: string | null;
  readonly points: number;
}

/**
 * A configured boost of a compiled points system: it multiplies the positive awards of eligible users
 * (`userAttributes`) from `start` to `end` (local dates, both included; `end` null: no end), rounded as
 * `rounding` says.
 *
 * @inline
 */
export interface CompiledBoost {
  readonly id: string;
  readonly key: string;
  readonly name: string;
  readonly multiplier: number;
  readonly start: string;
  readonly end: string | null;
  readonly rounding: 'down' | 'up' | 'nearest';
  readonly userAttributes: Filter;
}

/**
 * A points system of a compiled configuration ({@link LaurelConfig.pointsSystems}): its cap, levels, boosts and
 * triggers, the triggers also grouped by what fires them (metric, achievement, streak, time, user creation).
 */
export interface CompiledPointsSystem {
  readonly id: string;
  readonly key: string;
  readonly name: string;
  readonly description: string | null;
  readonly badgeUrl: string | null;
  readonly maxPoints: number | null;
  readonly allowNegative: boolean;
  /** Sorted by `points`, ascending. */
  readonly levels: readonly CompiledLevel[];
  readonly triggers: readonly CompiledTrigger[];
  readonly boosts: readonly CompiledBoost[];
  readonly timeTriggers: readonly CompiledTrigger[];
  /** True when a time trigger refills from the last spend (`anchor: 'lastSpend'`). */
  readonly spendAnchored: boolean;
  readonly creationTriggers: readonly CompiledTrigger[];
  readonly streakTriggers: readonly CompiledTrigger[];
  readonly metricTriggers: ReadonlyMap<string, readonly CompiledTrigger[]>;
  readonly achievementTriggers: ReadonlyMap<string, readonly CompiledTrigger[]>;
  /**
   * Triggers by the id they had before 0.3, derived from their position (only those without an explicit
   * `id`), so that states and ledger rows written then still find them: valid for the configuration in
   * force at the upgrade, which is when they are read.
   */
  readonly legacyTriggerIds: ReadonlyMap<string, CompiledTrigger>;
}

/**
 * A leaderboard of a compiled configuration ({@link LaurelConfig.leaderboards}): the validated definition with
 * its id, its dates and runs, its zone and its daily time window resolved.
 */
export type CompiledLeaderboard = Readonly<
  Omit<LeaderboardConfig, 'description' | 'end' | 'runUnit' | 'runInterval' | 'timeZone' | 'startTime' | 'endTime'> & {
    id: string;
    description: string | null;
    end: string | null;
    runUnit: 'day' | 'month' | 'year' | null;
    runInterval: number | null;
    /** The board's one zone, or null: runs follow each user's own zone (docs/rules.md, section 7). */
    timeZone: string | null;
    startTime: string | null;
    endTime: string | null;
    /**
     * The daily window of `startTime`/`endTime` in milliseconds since local midnight (`to` exclusive; `from`
     * after `to`: overnight), or null when the board has no time restriction.
     */
    timeWindow: { readonly from: number; readonly to: number } | null;
    metricName?: string;
    pointsSystemName?: string;
  }
>;

/**
 * A validated, compiled, frozen configuration. `K` carries the literal key names, so that
 * `engine.recordEvent('lesons', ...)` does not compile when the metric is `lessons`.
 */
export interface LaurelConfig<K extends ConfigKeys = ConfigKeys> {
  /** The default zone of users without one (and of boards following users' zones), canonical IANA name. */
  readonly timeZone: string;
  /** The first day of the week for weekly streaks, summaries and recaps. */
  readonly weekStartsOn: WeekStart;
  /** The metrics, in configuration order. */
  readonly metrics: readonly CompiledMetric[];
  /** The declared event and user attributes. */
  readonly attributes: readonly CompiledAttribute[];
  /** The achievements, in configuration order (the order responses list them in). */
  readonly achievements: readonly CompiledAchievement[];
  /** The streak rule; null without a `streak` section. */
  readonly streak: CompiledStreak | null;
  /** The points systems, in configuration order. */
  readonly pointsSystems: readonly CompiledPointsSystem[];
  /** The leaderboards, in configuration order. */
  readonly leaderboards: readonly CompiledLeaderboard[];
  /** The experiment's control group: `controlRatio` of new users, chosen from their id; null: none. */
  readonly experiment: { readonly controlRatio: number } | null;
  /** Reminders and `leaderboard.changed` throttling (`notifications`); every reminder null when not configured. */
  readonly notifications: CompiledNotifications;
  /** Lookups by key derived from the sections above, for the engine's hot paths. */
  readonly index: {
    readonly metrics: ReadonlyMap<string, CompiledMetric>;
    readonly eventAttributes: ReadonlySet<string>;
    readonly userAttributes: ReadonlySet<string>;
    readonly achievements: ReadonlyMap<string, CompiledAchievement>;
    readonly pointsSystems: ReadonlyMap<string, CompiledPointsSystem>;
    readonly leaderboards: ReadonlyMap<string, CompiledLeaderboard>;
    /** Metric achievements by metric key, in configuration order. */
    readonly achievementsByMetric: ReadonlyMap<string, readonly CompiledAchievement[]>;
    readonly streakAchievements: readonly CompiledAchievement[];
    /** Composite achievements, every prerequisite before the composites that need it (one pass settles all). */
    readonly compositeAchievements: readonly CompiledAchievement[];
    /** Metric achievements limited by `userAttributes`: a change of attributes alone can unlock them. */
    readonly gatedMetricAchievements: readonly CompiledAchievement[];
    /** Leaderboards by what feeds them: `metric:<key>`, `points:<key>`, `streak`. */
    readonly leaderboardsBySource: ReadonlyMap<string, readonly CompiledLeaderboard[]>;
    /** True when some points system has a `time` trigger (calls skip time grants otherwise). */
    readonly hasTimeTriggers: boolean;
  };
  /**
   * Fingerprints of the rules a user's derived state depends on, one per part. A state remembers those it
   * was last brought in line with (`UserState.rules`); a call on a state whose fingerprints differ applies
   * the configuration-change rules first (docs/rules.md, "When the configuration changes").
   */
  readonly rules: RuleFingerprints;
  /** Phantom: the literal key types. Never set at run time. */
  readonly __keys?: K;
}

/**
 * The compiled `notifications` section.
 *
 * @inline
 */
export interface CompiledNotifications {
  /** `emails.streak_reminder_due` this many hours before a streak expires; null: none. */
  readonly streakReminderHours: number | null;
  /** `emails.reactivation_due` after these whole days idle (message n at `days[n-1]`); null: none. */
  readonly reactivationDays: readonly number[] | null;
  /** `emails.recap_due` per period of this frequency; null: none. */
  readonly recap: 'daily' | 'weekly' | 'monthly' | null;
  /** `emails.achievement_due` with each completed achievement. */
  readonly achievement: boolean;
  /** `leaderboard.changed` at most once per run per this many milliseconds. */
  readonly leaderboardChangedMs: number;
}

/**
 * Fingerprints of the rules a user's state depends on ({@link LaurelConfig.rules}). A state records the ones
 * it was computed under; when they differ from the configuration's, the engine reconciles the state from the
 * user's ledger (see {@link needsReconcile}) before anything else.
 */
export interface RuleFingerprints {
  /** What unlocks achievements: each achievement's trigger, target, filters and prerequisites. */
  readonly achievements: string;
  /** What makes a streak: frequency, qualifying metrics and mode, week start, and the default zone. */
  readonly streak: string;
  /**
   * What bounds points: each system's `maxPoints` and the set of its time triggers; and the declared user
   * attributes, whose totals indexes (`attributeTotalsIndex`) a state is aligned with.
   */
  readonly points: string;
  /** The three, as a state records them: `achievements.streak.points`. */
  readonly all: string;
}

/** 32-bit FNV-1a of a JSON text, as 8 hex digits: a fingerprint, not a security primitive. */
function fingerprint(value: unknown): string {
  const text = JSON.stringify(value);
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

const sortedEntries = (r: Readonly<Record<string, string>> | undefined) => Object.entries(r ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

function ruleFingerprints(achievements: readonly CompiledAchievement[], streak: CompiledStreak | null, systems: readonly CompiledPointsSystem[], timeZone: string, weekStartsOn: WeekStart, userAttributes: readonly string[] = []): RuleFingerprints {
  const a = fingerprint(
    [...achievements]
      .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0))
      .map((x) => [
        x.key,
        x.trigger,
        // Only a status other than `active` counts, so that configurations written before statuses keep their fingerprint.
        ...(x.status === 'active' ? [] : [x.status]),
        x.trigger === 'metric' ? [x.metricKey, x.metricValue, sortedEntries(x.eventAttributes)] : x.trigger === 'streak' ? x.streakLength : x.trigger === 'achievement' ? [...x.achievementKeys].sort() : null,
        sortedEntries(x.userAttributes),
      ]),
  );
  const s = fingerprint(streak ? [streak.frequency, streak.metrics, streak.mode, weekStartsOn, timeZone] : null);
  // The attribute part (with its marker) makes a state written before the attribute totals indexes, or before
  // an attribute was declared again, write its totals into them at its next call (or replay).
  const p = fingerprint([[...systems].sort((x, y) => (x.key < y.key ? -1 : 1)).map((x) => [x.key, x.maxPoints, x.timeTriggers.map((t) => t.id).sort()]), ['attribute-totals', [...userAttributes].sort()]]);
  return { achievements: a, streak: s, points: p, all: `${a}.${s}.${p}` };
}

/**
 * Freezes the compiled configuration: every object and map, and (outside production, see core/mode.ts) every
 * array. In production its arrays stay unfrozen: V8 takes a frozen array's elements out of its fast kinds, so
 * a loop over one (the achievements, triggers and boards each call walks) runs several times slower and
 * allocates an iterator result per element. Its types are readonly throughout.
 */
const deepFreeze = <T>(value: T): T => {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    if (Array.isArray(value) && !DEVELOPMENT) {
      for (const v of value) deepFreeze(v);
      return value;
    }
    if (value instanceof Map) {
      for (const v of value.values()) deepFreeze(v);
    } else if (value instanceof Set) {
      // members are strings
    } else {
      for (const v of Object.values(value)) deepFreeze(v);
    }
    Object.freeze(value);
  }
  return value;
};

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string | undefined): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    if (key === undefined) continue;
    const list = map.get(key);
    if (list) list.push(item);
    else map.set(key, [item]);
  }
  return map;
}

/**
 * Composite achievements ordered so that each comes after every composite it requires (a post-order of an
 * iterative depth-first search: linear in the achievements and their prerequisites, no recursion).
 * The schema has already rejected cycles.
 */
function dependencyOrder(composites: readonly CompiledAchievement[], byKey: ReadonlyMap<string, CompiledAchievement>): CompiledAchievement[] {
  const out: CompiledAchievement[] = [];
  const seen = new Set<string>();
  for (const root of composites) {
    if (seen.has(root.key)) continue;
    seen.add(root.key);
    const stack: { a: CompiledAchievement; i: number }[] = [{ a: root, i: 0 }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { a: CompiledAchievement; i: number };
      const keys = top.a.trigger === 'achievement' ? top.a.achievementKeys : [];
      if (top.i >= keys.length) {
        out.push(top.a);
        stack.pop();
        continue;
      }
      const next = byKey.get(keys[top.i++] as string);
      if (next && next.trigger === 'achievement' && !seen.has(next.key)) {
        seen.add(next.key);
        stack.push({ a: next, i: 0 });
      }
    }
  }
  return out;
}

/**
 * Validates and compiles a configuration.
 *
 * The result carries the configuration's keys as literal types ({@link KeysOf}) when TypeScript kept them:
 * for a configuration written inline, or declared first `as const` (or `as const satisfies ConfigInput`). A
 * configuration declared first without `as const` has `string` keys (TypeScript widens the strings of a
 * plain object literal); it compiles, and the engine then takes any string. See the README, "Types".
 *
 * @throws {ConfigError} listing every zod issue with its path, when the configuration is invalid.
 * @example
 * ```ts
 * const config = defineConfig({
 *   timeZone: 'UTC',
 *   metrics: [{ key: 'lessons', name: 'Lessons completed' }],
 *   attributes: [{ key: 'device', name: 'Device', type: 'event' }],
 * });
 * ```
 */
export function defineConfig<const T extends ConfigInput>(input: T): LaurelConfig<KeysOf<T>> {
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => ({ path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)), message: i.message })));
  }
  const cfg = parsed.data;

  const metrics: CompiledMetric[] = cfg.metrics.map((m) => ({ id: m.id ?? stableId('metric', m.key), key: m.key, name: m.name }));
  const metricsByKey = new Map(metrics.map((m) => [m.key, m]));
  const attributes: CompiledAttribute[] = cfg.attributes.map((a) => ({ id: a.id ?? stableId('attribute', a.key), key: a.key, name: a.name, type: a.type }));

  const achievementIds = new Map(cfg.achievements.map((a) => [a.key, a.id ?? stableId('achievement', a.key)]));
  const achievements: CompiledAchievement[] = cfg.achievements.map((a, index) => {
    const base = {
      ...a,
      id: achievementIds.get(a.key) as string,
      index,
      description: a.description ?? null,
      badgeUrl: a.badgeUrl ?? null,
      userAttributes: a.userAttributes ?? {},
    };
    if (a.trigger === 'metric') {
      const metric = metricsByKey.get(a.metricKey) as CompiledMetric;
      return { ...base, metricId: metric.id, metricName: metric.name };
    }
    if (a.trigger === 'achievement') return { ...base, achievementIds: a.achievementKeys.map((k) => achievementIds.get(k) as string) };
    return base;
  });
  const achievementsByKey = new Map(achievements.map((a) => [a.key, a]));

  const pointsSystems: CompiledPointsSystem[] = cfg.pointsSystems.map((ps) => {
    const triggers: CompiledTrigger[] = ps.triggers.map((t) => {
      // `/` cannot occur in a key, so no two (system, trigger) pairs derive the same id.
      const id = t.id ?? stableId('pointsTrigger', `${ps.key}/${t.key}`);
      const extra: Record<string, string> = {};
      if (t.type === 'metric') {
        const metric = metricsByKey.get(t.metricKey) as CompiledMetric;
        extra.metricId = metric.id;
        extra.metricName = metric.name;
      }
      if (t.type === 'achievement') {
        const ach = achievementsByKey.get(t.achievementKey) as CompiledAchievement;
        extra.achievementId = ach.id;
        extra.achievementName = ach.name;
      }
      return { ...t, ...extra, id, systemKey: ps.key } as CompiledTrigger;
    });
    return {
      id: ps.id ?? stableId('pointsSystem', ps.key),
      key: ps.key,
      name: ps.name,
      description: ps.description ?? null,
      badgeUrl: ps.badgeUrl ?? null,
      maxPoints: ps.maxPoints ?? null,
      allowNegative: ps.allowNegative,
      levels: [...ps.levels]
        .sort((a, b) => a.points - b.points)
        .map((l) => ({ id: l.id ?? stableId('level', `${ps.key}:${l.key}`), key: l.key, name: l.name, description: l.description, badgeUrl: l.badgeUrl ?? null, points: l.points })),
      triggers,
      boosts: ps.boosts.map((b) => ({
        id: b.id ?? stableId('boost', `${ps.key}:${b.key}`),
        key: b.key,
        name: b.name,
        multiplier: b.multiplier,
        start: b.start,
        end: b.end ?? null,
        rounding: b.rounding,
        userAttributes: b.userAttributes ?? {},
      })),
      timeTriggers: triggers.filter((t) => t.type === 'time'),
      spendAnchored: triggers.some((t) => t.type === 'time' && t.anchor === 'lastSpend'),
      creationTriggers: triggers.filter((t) => t.type === 'user_creation'),
      streakTriggers: triggers.filter((t) => t.type === 'streak'),
      metricTriggers: groupBy(triggers, (t) => (t.type === 'metric' ? t.metricKey : undefined)),
      achievementTriggers: groupBy(triggers, (t) => (t.type === 'achievement' ? t.achievementKey : undefined)),
      legacyTriggerIds: new Map(ps.triggers.flatMap((t, i) => (t.id === undefined ? [[stableId('pointsTrigger', `${ps.key}:${i}:${t.type}`), triggers[i] as CompiledTrigger] as const] : []))),
    };
  });
  const pointsByKey = new Map(pointsSystems.map((p) => [p.key, p]));

  /** `HH:mm` or `HH:mm:ss` as milliseconds since midnight. */
  const msOfDay = (t: string) => (Number(t.slice(0, 2)) * 3600 + Number(t.slice(3, 5)) * 60 + (t.length > 5 ? Number(t.slice(6, 8)) : 0)) * 1000;
  const leaderboards: CompiledLeaderboard[] = cfg.leaderboards.map((lb) => {
    const runUnit = lb.runUnit ?? null;
    return {
      ...lb,
      id: lb.id ?? stableId('leaderboard', lb.key),
      description: lb.description ?? null,
      end: lb.end ?? null,
      runUnit,
      runInterval: runUnit ? (lb.runInterval ?? 1) : null,
      timeZone: lb.timeZone ?? null,
      startTime: lb.startTime ?? null,
      endTime: lb.endTime ?? null,
      timeWindow: lb.startTime === undefined && lb.endTime === undefined ? null : { from: msOfDay(lb.startTime ?? '00:00'), to: lb.endTime === undefined ? 86_400_000 : msOfDay(lb.endTime) },
      ...(lb.metricKey ? { metricName: metricsByKey.get(lb.metricKey)?.name } : {}),
      ...(lb.pointsSystemKey ? { pointsSystemName: pointsByKey.get(lb.pointsSystemKey)?.name } : {}),
    } as CompiledLeaderboard;
  });

  const streak: CompiledStreak | null = cfg.streak
    ? {
        frequency: cfg.streak.frequency,
        metrics: cfg.streak.metrics ?? null,
        mode: cfg.streak.mode,
        freezes: cfg.streak.freezes
          ? { initial: cfg.streak.freezes.initial, max: cfg.streak.freezes.max, autoEarn: cfg.streak.freezes.autoEarn ?? null }
          : null,
        customization: cfg.streak.customization
          ? { metrics: cfg.streak.customization.metrics, minThreshold: cfg.streak.customization.minThreshold ?? null, maxThreshold: cfg.streak.customization.maxThreshold ?? null }
          : null,
      }
    : null;

  const compiled: LaurelConfig<KeysOf<T>> = {
    timeZone: cfg.timeZone,
    weekStartsOn: cfg.weekStartsOn,
    metrics,
    attributes,
    achievements,
    streak,
    pointsSystems,
    leaderboards,
    experiment: cfg.experiment ? { controlRatio: cfg.experiment.controlRatio } : null,
    notifications: {
      streakReminderHours: cfg.notifications?.streakReminder?.hoursBefore ?? null,
      reactivationDays: cfg.notifications?.reactivation?.days ?? null,
      recap: cfg.notifications?.recap?.frequency ?? null,
      achievement: cfg.notifications?.achievement !== undefined,
      leaderboardChangedMs: (cfg.notifications?.leaderboardChangedMinutes ?? 15) * 60_000,
    },
    index: {
      metrics: metricsByKey,
      eventAttributes: new Set(attributes.filter((a) => a.type === 'event').map((a) => a.key)),
      userAttributes: new Set(attributes.filter((a) => a.type === 'user').map((a) => a.key)),
      achievements: achievementsByKey,
      pointsSystems: pointsByKey,
      leaderboards: new Map(leaderboards.map((l) => [l.key, l])),
      achievementsByMetric: groupBy(achievements, (a) => (a.trigger === 'metric' ? a.metricKey : undefined)),
      streakAchievements: achievements.filter((a) => a.trigger === 'streak'),
      compositeAchievements: dependencyOrder(achievements.filter((a) => a.trigger === 'achievement'), achievementsByKey),
      gatedMetricAchievements: achievements.filter((a) => a.trigger === 'metric' && Object.keys(a.userAttributes).length > 0),
      // Inactive boards are not tracked: no event reaches them.
      leaderboardsBySource: groupBy(leaderboards, (l) =>
        l.status === 'inactive' ? undefined : l.rankBy === 'metric' ? `metric:${l.metricKey}` : l.rankBy === 'points' ? `points:${l.pointsSystemKey}` : 'streak',
      ),
      hasTimeTriggers: pointsSystems.some((p) => p.timeTriggers.length > 0),
    },
    rules: ruleFingerprints(achievements, streak, pointsSystems, cfg.timeZone, cfg.weekStartsOn, attributes.filter((a) => a.type === 'user').map((a) => a.key)),
  };
  return deepFreeze(compiled);
}

/** The key types a compiled configuration carries ({@link ConfigKeys}, every one `string`, for an untyped one). */
export type ConfigKeysOf<C> = C extends LaurelConfig<infer K> ? K : ConfigKeys;
/** The metric keys of a compiled configuration (`string` for an untyped one). */
export type MetricKeyOf<C> = C extends LaurelConfig<infer K> ? K['metric'] : string;
/** The achievement keys of a compiled configuration (`string` for an untyped one). */
export type AchievementKeyOf<C> = C extends LaurelConfig<infer K> ? K['achievement'] : string;
/** The points-system keys of a compiled configuration (`string` for an untyped one). */
export type PointsKeyOf<C> = C extends LaurelConfig<infer K> ? K['points'] : string;
/** The leaderboard keys of a compiled configuration (`string` for an untyped one). */
export type LeaderboardKeyOf<C> = C extends LaurelConfig<infer K> ? K['leaderboard'] : string;
