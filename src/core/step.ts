/**
 * The working context of one pure call: a private copy of the user's state that the feature modules update
 * in place, plus the effects and response parts they collect. A Step never escapes the core; `applyEvent`
 * and its siblings return plain data built from it.
 */
import type { CompiledAchievement, LaurelConfig } from '../config/define.js';
import type { LocalDate } from './calendar.js';
import { canonicalTimeZone, isSupportedInstant, localDateOf } from './calendar.js';
import { ValidationError } from '../errors.js';
import type { Award, Effects, UserState } from './types.js';

export interface Step {
  readonly cfg: LaurelConfig;
  readonly state: UserState;
  readonly now: Date;
  readonly nowIso: string;
  readonly newId: () => string;
  readonly effects: Effects;
  /** Awards made in this call, per points system, in order. */
  readonly awards: Map<string, Award[]>;
  /** Achievements unlocked in this call, in unlock order. */
  readonly unlocked: CompiledAchievement[];
  /** Streak length before this call's lazy maintenance; used to see whether it changed. */
  streakLengthBefore: number;
  streakExtended: boolean;
  /** The user's zone for this call (latest valid tz, else the config's). */
  tz: string;
  today: LocalDate;
}

export function userZone(cfg: LaurelConfig, state: UserState): string {
  return state.user.tz ?? cfg.timeZone;
}

export function createStep(cfg: LaurelConfig, state: UserState, now: Date, newId: () => string): Step {
  const tz = userZone(cfg, state);
  return {
    cfg,
    state,
    now,
    nowIso: now.toISOString(),
    newId,
    effects: { ledger: [], leaderboard: [], counters: {}, idempotency: null, created: false },
    awards: new Map(),
    unlocked: [],
    streakLengthBefore: state.streak?.length ?? 0,
    streakExtended: false,
    tz,
    today: localDateOf(now, tz),
  };
}

/** Re-reads the zone after a user update changed `tz`. */
export function refreshZone(step: Step): void {
  step.tz = userZone(step.cfg, step.state);
  step.today = localDateOf(step.now, step.tz);
}

/** True when every pair of `filter` is present in `attributes`. */
export function matchesFilter(filter: Readonly<Record<string, string>> | undefined, attributes: Readonly<Record<string, string>> | undefined): boolean {
  if (!filter) return true;
  for (const key in filter) {
    if (!attributes || !Object.hasOwn(attributes, key) || attributes[key] !== filter[key]) return false;
  }
  return true;
}

/** A record with no prototype: a key named `toString` or `valueOf` reads only what was stored under it. */
export function record<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/** The value stored under `key` in a record of any prototype, never an inherited member. */
export function own<T>(rec: Readonly<Record<string, T>> | null | undefined, key: string): T | undefined {
  return rec != null && Object.hasOwn(rec, key) ? rec[key] : undefined;
}

const badState = (what: string): never => {
  throw new ValidationError(`prior state is not a Laurel user state: ${what}`, [{ path: ['prior'], message: what }]);
};

function copyRecord<T>(src: unknown, what: string, copy: (v: unknown, key: string) => T): Record<string, T> {
  const out = record<T>();
  if (src === undefined || src === null) return out;
  if (typeof src !== 'object' || Array.isArray(src)) return badState(`${what} must be an object`);
  for (const k of Object.keys(src)) out[k] = copy((src as Record<string, unknown>)[k], k);
  return out;
}

const str = (v: unknown, what: string): string => (typeof v === 'string' ? v : badState(`${what} must be a string`));
const strOrNull = (v: unknown, what: string): string | null => (v === null || v === undefined ? null : str(v, what));
const instant = (v: unknown, what: string): string => (typeof v === 'string' && isSupportedInstant(Date.parse(v)) ? v : badState(`${what} must be an ISO instant in the supported range`));
const zoneOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : (canonicalTimeZone(v as string) ?? badState('user.tz must be a known time zone')));
const num = (v: unknown, what: string): number => (typeof v === 'number' && Number.isFinite(v) ? v : badState(`${what} must be a finite number`));

/**
 * Copy of a user state whose records (metrics, achievements, points, boards, attributes, sums) have no
 * prototype, so every configured key, `toString` and `valueOf` included, reads only its own entry. States
 * come from stores as parsed JSON; this is also where a malformed one is refused with a ValidationError.
 */
export function cloneState(state: UserState): UserState {
  if (typeof state !== 'object' || state === null) return badState('state must be an object');
  const u = state.user as unknown as Record<string, unknown> | undefined;
  if (typeof u !== 'object' || u === null) return badState('user must be an object');
  const s = state.streak;
  return {
    user: {
      id: str(u.id, 'user.id'),
      email: strOrNull(u.email, 'user.email'),
      name: strOrNull(u.name, 'user.name'),
      tz: zoneOrNull(u.tz),
      attributes: copyRecord(u.attributes, 'user.attributes', (v) => str(v, 'user.attributes')),
      created: instant(u.created, 'user.created'),
      updated: str(u.updated, 'user.updated'),
    },
    metrics: copyRecord(state.metrics, 'metrics', (v) => str(v, 'metrics')),
    achievementProgress: copyRecord(state.achievementProgress, 'achievementProgress', (v) => str(v, 'achievementProgress')),
    achievements: copyRecord(state.achievements, 'achievements', (v) => {
      const a = v as { achievedAt?: unknown; completionId?: unknown } | null;
      return { achievedAt: str(a?.achievedAt, 'achievements.achievedAt'), completionId: str(a?.completionId, 'achievements.completionId') };
    }),
    streak:
      s === null || s === undefined
        ? null
        : typeof s !== 'object'
          ? badState('streak must be an object')
          : { ...s, sums: copyRecord(s.sums, 'streak.sums', (v) => str(v, 'streak.sums')) },
    points: copyRecord(state.points, 'points', (v) => {
      const p = v as { total?: unknown; metric?: unknown; time?: unknown } | null;
      if (typeof p !== 'object' || p === null) return badState('points must hold objects');
      return {
        total: num(p.total, 'points.total'),
        metric: copyRecord(p.metric, 'points.metric', (m) => {
          const t = m as { sum?: unknown; hw?: unknown } | null;
          return { sum: str(t?.sum, 'points.metric.sum'), hw: str(t?.hw, 'points.metric.hw') };
        }),
        time: copyRecord(p.time, 'points.time', (n) => num(n, 'points.time')),
      };
    }),
    leaderboards: copyRecord(state.leaderboards, 'leaderboards', (v) => {
      const b = v as Record<string, unknown> | null;
      if (typeof b !== 'object' || b === null) return badState('leaderboards must hold objects');
      return { run: str(b.run, 'leaderboards.run'), group: str(b.group, 'leaderboards.group'), value: str(b.value, 'leaderboards.value'), reachedAt: str(b.reachedAt, 'leaderboards.reachedAt') };
    }),
  };
}
