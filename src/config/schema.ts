/**
 * The zod schemas of Laurel's configuration: the only source of its input and output types.
 * Structure is checked here; cross-references (unknown keys, cycles) are checked in `superRefine` so that
 * every problem is reported at once, each with its path.
 */
import { z } from 'zod';
import { canonicalTimeZone, isValidLocalDate, isValidTimeZone } from '../core/calendar.js';
import { isStorableText } from '../core/text.js';

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

export const keySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/, 'must start with a letter or digit and use only letters, digits, "_", "-", "." and ":"')
  .refine((k) => !FORBIDDEN_KEYS.has(k), 'is a reserved name');

// Every string of a configuration ends up in stored rows (names and ids are copied into awards), so each
// must be text every store can keep: no NUL, no lone surrogate.
const text = () => z.string().refine(isStorableText, 'must be well-formed text without NUL characters');
const idSchema = text().min(1).max(255).optional();
const nullableText = text().nullable().optional();
const name = () => text().min(1);
// Zone names match in any letter case; the compiled configuration holds the canonical IANA name.
const timeZoneSchema = z.string().refine(isValidTimeZone, { message: 'must be a known IANA time zone name' }).transform((tz) => canonicalTimeZone(tz) as string);
const dateSchema = z.string().refine(isValidLocalDate, 'must be a date in YYYY-MM-DD form');
const timeOfDaySchema = z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$/, 'must be a time of day in HH:mm or HH:mm:ss form');
const attributeFilter = z.record(z.string(), text()).optional();
const positive = z.number().finite().positive();
const points = z
  .number()
  .int('must be an integer')
  .refine((n) => n !== 0, 'must not be zero');

export const metricSchema = z.object({ key: keySchema, name: name(), id: idSchema }).strict();

export const attributeSchema = z
  .object({ key: keySchema, name: name(), type: z.enum(['event', 'user']), id: idSchema })
  .strict();

const achievementBase = {
  key: keySchema,
  name: name(),
  id: idSchema,
  description: nullableText,
  badgeUrl: nullableText,
  userAttributes: attributeFilter,
  // The hosted service's statuses: `inactive` is not unlockable and not listed; `locked` unlocks for nobody
  // new and is shown only to the users who hold it.
  status: z.enum(['active', 'inactive', 'locked']).default('active'),
};

export const achievementSchema = z.discriminatedUnion('trigger', [
  z.object({ ...achievementBase, trigger: z.literal('metric'), metricKey: keySchema, metricValue: positive, eventAttributes: attributeFilter }).strict(),
  z.object({ ...achievementBase, trigger: z.literal('streak'), streakLength: z.number().int().min(1) }).strict(),
  z.object({ ...achievementBase, trigger: z.literal('api') }).strict(),
  z.object({ ...achievementBase, trigger: z.literal('achievement'), achievementKeys: z.array(keySchema).min(1) }).strict(),
]);

export const streakSchema = z
  .object({
    frequency: z.enum(['daily', 'weekly', 'monthly']).default('daily'),
    metrics: z.array(z.object({ key: keySchema, threshold: positive }).strict()).min(1).optional(),
    mode: z.enum(['any', 'all']).default('any'),
    freezes: z
      .object({
        initial: z.number().int().min(0).default(0),
        max: z.number().int().min(0),
        autoEarn: z.object({ everyDays: z.number().int().min(1), amount: z.number().int().min(1) }).strict().optional(),
      })
      .strict()
      .optional(),
    // Guardrails of per-user streak rules (`updatePreferences`): the metrics a user may pick, and the
    // thresholds' bounds. Without it, users can only turn their streak off and on.
    customization: z
      .object({ metrics: z.array(keySchema).min(1), minThreshold: positive.optional(), maxThreshold: positive.optional() })
      .strict()
      .optional(),
  })
  .strict();

// A trigger's `key` names it for good (unique within its system): its id and the user's progress on it derive
// from the system's key and this key, never from its position, so editing other triggers changes nothing.
// Trigger ids key records in user states: never a name a write could take for the prototype.
const triggerBase = { key: keySchema, id: idSchema.refine((id) => id === undefined || !FORBIDDEN_KEYS.has(id), 'is a reserved name'), points };

export const pointsTriggerSchema = z.discriminatedUnion('type', [
  z.object({
    ...triggerBase,
    type: z.literal('metric'),
    metricKey: keySchema,
    metricThreshold: positive,
    eventAttributes: attributeFilter,
    userAttributes: attributeFilter,
    blockIfOutOfPoints: z.boolean().optional(),
  }).strict(),
  z.object({ ...triggerBase, type: z.literal('streak'), streakLengthThreshold: z.number().int().min(1), userAttributes: attributeFilter, blockIfOutOfPoints: z.boolean().optional() }).strict(),
  z.object({ ...triggerBase, type: z.literal('achievement'), achievementKey: keySchema, userAttributes: attributeFilter, blockIfOutOfPoints: z.boolean().optional() }).strict(),
  // A user_creation trigger pays only a user who has the attributes at creation; a filtered time trigger pays
  // only the grants that fall due while the user has them (docs/rules.md, points).
  z.object({ ...triggerBase, type: z.literal('user_creation'), userAttributes: attributeFilter }).strict(),
  z.object({
    ...triggerBase,
    type: z.literal('time'),
    timeUnit: z.enum(['hour', 'day']),
    timeInterval: z.number().int().min(1),
    userAttributes: attributeFilter,
    // `created`: grants on a fixed schedule from the user's creation; `lastSpend`: the schedule restarts at
    // each spend (a negative award other than a time grant), the way mobile games refill hearts.
    anchor: z.enum(['created', 'lastSpend']).optional(),
  }).strict(),
]);

export const levelSchema = z
  .object({ key: keySchema, name: name(), id: idSchema, description: text().default(''), badgeUrl: nullableText, points: z.number().int().min(0) })
  .strict();

export const boostSchema = z
  .object({
    key: keySchema,
    name: name(),
    id: idSchema,
    multiplier: positive,
    start: dateSchema,
    end: dateSchema.nullable().optional(),
    rounding: z.enum(['down', 'up', 'nearest']).default('down'),
    userAttributes: attributeFilter,
  })
  .strict();

export const pointsSystemSchema = z
  .object({
    key: keySchema,
    name: name(),
    id: idSchema,
    description: nullableText,
    badgeUrl: nullableText,
    maxPoints: z.number().int().positive().nullable().optional(),
    allowNegative: z.boolean().default(false),
    levels: z.array(levelSchema).default([]),
    triggers: z.array(pointsTriggerSchema).default([]),
    boosts: z.array(boostSchema).default([]),
  })
  .strict();

export const leaderboardSchema = z
  .object({
    key: keySchema,
    name: name(),
    id: idSchema,
    description: nullableText,
    rankBy: z.enum(['metric', 'points', 'streak']),
    metricKey: keySchema.optional(),
    pointsSystemKey: keySchema.optional(),
    start: dateSchema,
    end: dateSchema.nullable().optional(),
    runUnit: z.enum(['day', 'month', 'year']).nullable().optional(),
    // Bounded so that every run of a board starting in the supported date range ends inside it.
    runInterval: z.number().int().min(1).max(1000).optional(),
    maxParticipants: z.number().int().min(1).default(1000),
    // Without a zone, runs follow each user's own calendar (docs/rules.md, section 7).
    timeZone: timeZoneSchema.optional(),
    breakdownAttributes: z.array(keySchema).default([]),
    // A daily window of local time (at or after startTime, before endTime; overnight when startTime is later).
    startTime: timeOfDaySchema.optional(),
    endTime: timeOfDaySchema.optional(),
    // `inactive`: not tracked, not listed unless asked (the hosted service's statuses).
    status: z.enum(['active', 'inactive']).default('active'),
  })
  .strict();

/**
 * The zod schema of a configuration: every field's type and default, and the cross-references between
 * sections (unknown keys, cycles), each problem reported with its path. {@link defineConfig} parses with it
 * (throwing {@link ConfigError} with the same issues) and then compiles the result; use it where only
 * validation is wanted, e.g. `configSchema.safeParse(json)` on a configuration file.
 */
export const configSchema = z
  .object({
    timeZone: timeZoneSchema.default('UTC'),
    weekStartsOn: z.union([z.literal(0), z.literal(1), z.literal(2), z.literal(3), z.literal(4), z.literal(5), z.literal(6)]).default(1),
    metrics: z.array(metricSchema).min(1, 'at least one metric is required'),
    attributes: z.array(attributeSchema).default([]),
    achievements: z.array(achievementSchema).default([]),
    streak: streakSchema.optional(),
    pointsSystems: z.array(pointsSystemSchema).default([]),
    leaderboards: z.array(leaderboardSchema).default([]),
    // A control group for experiments: this share of new users (chosen from their id) gets no reminders.
    experiment: z.object({ controlRatio: z.number().min(0).max(1) }).strict().optional(),
    // Change notifications (docs/rules.md, "Change notifications"): the reminders (`emails.*` change events)
    // and how often `leaderboard.changed` may fire. Without it no reminder is emitted.
    notifications: z
      .object({
        // `emails.streak_reminder_due`: this many hours before the user's streak expires in their zone.
        streakReminder: z.object({ hoursBefore: z.number().int().min(1).max(168) }).strict().optional(),
        // `emails.reactivation_due`: message n is due `days[n-1]` whole days after the user's last event.
        reactivation: z
          .object({ days: z.array(z.number().int().min(1).max(3650)).min(1).max(20) })
          .strict()
          .refine((r) => r.days.every((d, i) => i === 0 || d > (r.days[i - 1] as number)), { message: 'days must be strictly increasing', path: ['days'] })
          .optional(),
        // `emails.recap_due`: at the start of each period in the user's zone, for the period before (if they were active in it).
        recap: z.object({ frequency: z.enum(['daily', 'weekly', 'monthly']) }).strict().optional(),
        // `emails.achievement_due`: with each achievement a user completes.
        achievement: z.object({}).strict().optional(),
        // `leaderboard.changed` fires at most once per run per this many minutes (the service's 15).
        leaderboardChangedMinutes: z.number().int().min(1).max(10_080).default(15),
      })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const unique = (items: { key: string }[], path: string) => {
      const seen = new Set<string>();
      items.forEach((item, i) => {
        if (seen.has(item.key)) issue([path, i, 'key'], `duplicate key "${item.key}"`);
        seen.add(item.key);
      });
    };
    unique(cfg.metrics, 'metrics');
    unique(cfg.attributes, 'attributes');
    unique(cfg.achievements, 'achievements');
    unique(cfg.pointsSystems, 'pointsSystems');
    unique(cfg.leaderboards, 'leaderboards');

    const metricKeys = new Set(cfg.metrics.map((m) => m.key));
    const eventAttrs = new Set(cfg.attributes.filter((a) => a.type === 'event').map((a) => a.key));
    const userAttrs = new Set(cfg.attributes.filter((a) => a.type === 'user').map((a) => a.key));
    const achievementKeys = new Set(cfg.achievements.map((a) => a.key));
    const pointsKeys = new Set(cfg.pointsSystems.map((p) => p.key));
    const checkMetric = (key: string, path: (string | number)[]) => {
      if (!metricKeys.has(key)) issue(path, `unknown metric key "${key}"`);
    };
    const checkAttrs = (filter: Record<string, string> | undefined, known: Set<string>, kind: string, path: (string | number)[]) => {
      for (const k of Object.keys(filter ?? {})) if (!known.has(k)) issue([...path, k], `"${k}" is not a declared ${kind} attribute`);
    };

    cfg.achievements.forEach((a, i) => {
      checkAttrs(a.userAttributes, userAttrs, 'user', ['achievements', i, 'userAttributes']);
      if (a.trigger === 'metric') {
        checkMetric(a.metricKey, ['achievements', i, 'metricKey']);
        checkAttrs(a.eventAttributes, eventAttrs, 'event', ['achievements', i, 'eventAttributes']);
      } else if (a.trigger === 'streak' && !cfg.streak) {
        issue(['achievements', i, 'trigger'], 'a streak achievement needs a `streak` configuration');
      } else if (a.trigger === 'achievement') {
        a.achievementKeys.forEach((k, j) => {
          if (!achievementKeys.has(k)) issue(['achievements', i, 'achievementKeys', j], `unknown achievement key "${k}"`);
          if (k === a.key) issue(['achievements', i, 'achievementKeys', j], 'an achievement cannot require itself');
        });
      }
    });
    // Prerequisite cycles among composite achievements: an iterative depth-first search with colours (a
    // chain of any length, 12 000 deep included, costs linear time and no call stack).
    const requires = new Map(cfg.achievements.map((a) => [a.key, a.trigger === 'achievement' ? a.achievementKeys : []]));
    const position = new Map(cfg.achievements.map((a, i) => [a.key, i]));
    const colour = new Map<string, 1 | 2>();
    for (const root of cfg.achievements) {
      if (colour.has(root.key)) continue;
      const trail: string[] = [root.key];
      const cursor: number[] = [0];
      colour.set(root.key, 1);
      while (trail.length > 0) {
        const key = trail[trail.length - 1] as string;
        const next = (requires.get(key) ?? [])[cursor[cursor.length - 1] as number];
        if (next === undefined) {
          colour.set(key, 2);
          trail.pop();
          cursor.pop();
          continue;
        }
        cursor[cursor.length - 1] = (cursor[cursor.length - 1] as number) + 1;
        if (!requires.has(next) || colour.get(next) === 2) continue;
        if (colour.get(next) === 1) {
          const cycle = [...trail.slice(trail.indexOf(next)), next];
          if (cycle.length > 2) issue(['achievements', position.get(next) as number, 'achievementKeys'], `prerequisite cycle: ${cycle.length > 12 ? [...cycle.slice(0, 5), '...', ...cycle.slice(-5)].join(' -> ') : cycle.join(' -> ')}`);
          continue;
        }
        colour.set(next, 1);
        trail.push(next);
        cursor.push(0);
      }
    }

    if (cfg.streak?.metrics) cfg.streak.metrics.forEach((m, i) => checkMetric(m.key, ['streak', 'metrics', i, 'key']));
    if (cfg.streak?.freezes && cfg.streak.freezes.initial > cfg.streak.freezes.max) issue(['streak', 'freezes', 'initial'], 'must not exceed max');
    if (cfg.streak?.customization) {
      const c = cfg.streak.customization;
      c.metrics.forEach((k, i) => checkMetric(k, ['streak', 'customization', 'metrics', i]));
      if (c.minThreshold !== undefined && c.maxThreshold !== undefined && c.minThreshold > c.maxThreshold) issue(['streak', 'customization', 'minThreshold'], 'must not exceed maxThreshold');
    }

    cfg.pointsSystems.forEach((ps, i) => {
      unique(ps.levels, `pointsSystems.${i}.levels`);
      unique(ps.boosts, `pointsSystems.${i}.boosts`);
      unique(ps.triggers, `pointsSystems.${i}.triggers`);
      const ids = new Set<string>();
      ps.triggers.forEach((t, j) => {
        const path = ['pointsSystems', i, 'triggers', j];
        if (t.id !== undefined) {
          if (ids.has(t.id)) issue([...path, 'id'], `duplicate trigger id "${t.id}"`);
          ids.add(t.id);
        }
        if (t.type === 'metric') {
          checkMetric(t.metricKey, [...path, 'metricKey']);
          checkAttrs(t.eventAttributes, eventAttrs, 'event', [...path, 'eventAttributes']);
        }
        if (t.type === 'streak' && !cfg.streak) issue([...path, 'type'], 'a streak trigger needs a `streak` configuration');
        if (t.type === 'achievement' && !achievementKeys.has(t.achievementKey)) issue([...path, 'achievementKey'], `unknown achievement key "${t.achievementKey}"`);
        if ('userAttributes' in t) checkAttrs(t.userAttributes, userAttrs, 'user', [...path, 'userAttributes']);
        if ('blockIfOutOfPoints' in t && t.blockIfOutOfPoints && t.points > 0) issue([...path, 'blockIfOutOfPoints'], 'only a negative trigger can block');
      });
      ps.boosts.forEach((b, j) => {
        if (b.end && b.end < b.start) issue(['pointsSystems', i, 'boosts', j, 'end'], 'must not be before start');
        checkAttrs(b.userAttributes, userAttrs, 'user', ['pointsSystems', i, 'boosts', j, 'userAttributes']);
      });
    });

    cfg.leaderboards.forEach((lb, i) => {
      const path = ['leaderboards', i];
      if (lb.rankBy === 'metric') {
        if (!lb.metricKey) issue([...path, 'metricKey'], 'required when rankBy is "metric"');
        else checkMetric(lb.metricKey, [...path, 'metricKey']);
      }
      if (lb.rankBy === 'points') {
        if (!lb.pointsSystemKey) issue([...path, 'pointsSystemKey'], 'required when rankBy is "points"');
        else if (!pointsKeys.has(lb.pointsSystemKey)) issue([...path, 'pointsSystemKey'], `unknown points system key "${lb.pointsSystemKey}"`);
      }
      if (lb.rankBy === 'streak') {
        if (!cfg.streak) issue([...path, 'rankBy'], 'a streak leaderboard needs a `streak` configuration');
        if (lb.runUnit) issue([...path, 'runUnit'], 'streak leaderboards cannot repeat');
        // A streak board ranks the streak's length, which no time of day limits.
        if (lb.startTime !== undefined) issue([...path, 'startTime'], 'streak leaderboards rank the streak length: time restrictions do not apply');
        if (lb.endTime !== undefined) issue([...path, 'endTime'], 'streak leaderboards rank the streak length: time restrictions do not apply');
      }
      // An empty window (equal times; a lone endTime of 00:00, startTime being 00:00 then) is a mistake.
      const seconds = (t: string) => (t.length === 5 ? `${t}:00` : t);
      if (lb.endTime !== undefined && seconds(lb.endTime) === seconds(lb.startTime ?? '00:00')) issue([...path, 'endTime'], 'must differ from startTime (00:00 when unset): the window would be empty');
      if (lb.end && lb.end < lb.start) issue([...path, 'end'], 'must not be before start');
      if (lb.runInterval !== undefined && !lb.runUnit) issue([...path, 'runInterval'], 'needs a runUnit');
      lb.breakdownAttributes.forEach((k, j) => {
        if (!userAttrs.has(k)) issue([...path, 'breakdownAttributes', j], `"${k}" is not a declared user attribute`);
      });
    });
  });

/**
 * `T` with every array and object property read-only, at every depth: what an `as const` object literal
 * is. Input types are declared through it so that both mutable and `as const` values are accepted.
 */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends readonly (infer E)[]
    ? readonly DeepReadonly<E>[]
    : T extends object
      ? { readonly [P in keyof T]: DeepReadonly<T[P]> }
      : T;

/**
 * What `defineConfig` accepts (zod's input type: defaults may be omitted), read-only at every depth so that
 * a configuration declared `as const` (or `as const satisfies ConfigInput`) is accepted as well as a mutable
 * one. Its keys are `string`: `defineConfig` infers the literal keys from the value it is given.
 */
export type ConfigInput = DeepReadonly<z.input<typeof configSchema>>;
/** The configuration after validation and defaults. */
export type ParsedConfig = z.output<typeof configSchema>;
export type AchievementInput = z.input<typeof achievementSchema>;
export type PointsTriggerConfig = z.output<typeof pointsTriggerSchema>;
export type AchievementConfig = z.output<typeof achievementSchema>;
export type LevelConfig = z.output<typeof levelSchema>;
export type BoostConfig = z.output<typeof boostSchema>;
export type LeaderboardConfig = z.output<typeof leaderboardSchema>;
export type PointsSystemConfig = z.output<typeof pointsSystemSchema>;
export type StreakConfig = z.output<typeof streakSchema>;
