/**
 * The working context of one pure call: the next state, built from the prior one by structural sharing
 * (a record is copied on the call's first write to it, never the whole state), plus the effects and
 * response parts the feature modules collect. A Step never escapes the core; `applyEvent` and its siblings
 * return plain data built from it.
 */
import type { CompiledAchievement, LaurelConfig } from '../config/define.js';
import type { LocalDate } from './calendar.js';
import { canonicalTimeZone, isSupportedInstant, localDateOf } from './calendar.js';
import { ValidationError } from '../errors.js';
import type { Award, BoardEntry, BoardState, Effects, Notices, PointsState, StreakState, UserFields, UserRecord, UserState, YearlyChanges } from './types.js';
import { instantMs, isoOf } from './instants.js';
import { DEVELOPMENT } from './mode.js';

export interface Step {
  readonly cfg: LaurelConfig;
  /**
   * The working state: a new top-level object whose records are shared with the prior state until this call
   * first writes them (see `own*` below); nothing reachable from the prior state is ever written.
   */
  readonly state: UserState;
  /** Records of `state` this call created or copied: the only ones it may write. */
  readonly owned: Owned;
  readonly now: Date;
  readonly nowIso: string;
  readonly newId: () => string;
  readonly effects: Effects;
  /** Awards made in this call, per points system, in order ({@link NO_AWARDS} until the first; see {@link awardList}). */
  awards: ReadonlyMap<string, Award[]>;
  /** Achievements unlocked in this call, in unlock order. */
  readonly unlocked: CompiledAchievement[];
  /** Streak length before this call's lazy maintenance; used to see whether it changed. */
  streakLengthBefore: number;
  streakExtended: boolean;
  /**
   * A `restoreStreak` of this call: the lost streak's length and that of the streak begun since (0 when none),
   * whose sum is the restored length (streak triggers pay what one streak of that length would have been
   * paid beyond what the two were; see points.ts).
   */
  streakRestored: { lost: number; since: number } | null;
  /** The user's zone for this call (latest valid tz, else the config's). */
  tz: string;
  today: LocalDate;
  /** Local dates of `now` in zones other than the user's, formatted once per call (made on first use). */
  dates: Map<string, LocalDate> | null;
  /** The user fields of this call's input when it created the user or sent any (for its ledger row). */
  userFields: UserFields | null;
  /**
   * The user's attributes before this call's upsert (the prior state's record, never written): what the
   * user had between the previous call and this one, by which time grants due in between are judged, and
   * from whose values' totals indexes a changed attribute moves the user.
   */
  readonly attributesBefore: Readonly<Record<string, string>>;
  /** The user's creation instant and its local date in `tz`, parsed once per call (made on first use). */
  createdAt: CreatedAt | null;
  /**
   * A read (`viewState`): nothing of it is committed, so a due time grant it materialises takes an award id
   * derived from the grant, the same on every read, instead of one drawn from `newId` (see `accrueTimeGrants`).
   */
  view: boolean;
}

/** An instant (ms) with its local date in the call's zone. */
export interface CreatedAt {
  ms: number;
  date: LocalDate;
}

/** The user's creation instant and its local date in the call's zone, computed once per call (per zone). */
export function createdAtOf(step: Pick<Step, 'state' | 'tz' | 'createdAt'>): CreatedAt {
  let at = step.createdAt;
  if (at === null) {
    const ms = instantMs(step.state.user.created);
    at = step.createdAt = { ms, date: localDateOf(ms, step.tz) };
  }
  return at;
}

export function userZone(cfg: LaurelConfig, state: UserState): string {
  return state.user.tz ?? cfg.timeZone;
}

/** A call's awards before its first: one shared empty map, never written (most calls award nothing). */
export const NO_AWARDS: ReadonlyMap<string, Award[]> = new Map();

/** The call's list of awards in a points system, created (with the call's own map) on the first. */
export function awardList(step: Step, systemKey: string): Award[] {
  let list = step.awards.get(systemKey);
  if (!list) {
    const own = step.awards === NO_AWARDS ? new Map<string, Award[]>() : (step.awards as Map<string, Award[]>);
    own.set(systemKey, (list = []));
    step.awards = own;
  }
  return list;
}

/** The call's awards as a result hands them out: its own map, a new empty one when it awarded nothing. */
export function awardsOut(step: Step): Map<string, Award[]> {
  return step.awards === NO_AWARDS ? new Map() : (step.awards as Map<string, Award[]>);
}

/** Starts a call on `state` (already adopted, see {@link adoptState}); `fresh` when the state is new in this call. */
export function createStep(cfg: LaurelConfig, base: UserState, now: Date, newId: () => string, fresh = false): Step {
  const tz = userZone(cfg, base);
  // A new top-level object (a fresh state is this call's own already): the state the call returns, marked as
  // checked from the start (it never leaves the core before `sealState`), so that every state the core reads
  // and writes has the marked shape.
  const state: UserState = fresh ? Checked.mark(base) : shallowState(base, base.notices, true);
  const owned = new Owned(state);
  if (fresh) collectOwned(state, owned);
  const step: Step = {
    cfg,
    state,
    owned,
    now,
    nowIso: isoOf(now.getTime()),
    newId,
    effects: { ledger: [], leaderboard: [], counters: {}, idempotency: null, created: false },
    awards: NO_AWARDS,
    unlocked: [],
    streakLengthBefore: state.streak?.length ?? 0,
    streakExtended: false,
    streakRestored: null,
    tz,
    today: localDateOf(now, tz),
    dates: null,
    userFields: null,
    attributesBefore: state.user.attributes,
    createdAt: null,
    view: false,
  };
  return step;
}

/** The local date of the call's `now` in `tz`, computed once per zone per call. */
export function localDateIn(step: Step, tz: string): LocalDate {
  if (tz === step.tz) return step.today;
  step.dates ??= new Map();
  let date = step.dates.get(tz);
  if (date === undefined) {
    date = localDateOf(step.now, tz);
    step.dates.set(tz, date);
  }
  return date;
}

/** Re-reads the zone after a user update changed `tz`. */
export function refreshZone(step: Step): void {
  step.tz = userZone(step.cfg, step.state);
  step.today = localDateOf(step.now, step.tz);
  step.createdAt = null;
}

/**
 * The objects a call may write: a handful, so a plain array beats a Set (whose creation alone costs more
 * than the few lookups a call makes).
 */
export class Owned {
  private readonly items: object[];
  constructor(first: object) {
    this.items = [first];
  }
  add(o: object): this {
    this.items.push(o);
    return this;
  }
  has(o: object): boolean {
    return this.items.includes(o);
  }
  [Symbol.iterator](): Iterator<object> {
    return this.items[Symbol.iterator]();
  }
}

function collectOwned(state: UserState, owned: Owned): void {
  owned.add(state.user).add(state.user.attributes).add(state.metrics).add(state.achievementProgress).add(state.achievements).add(state.points).add(state.leaderboards);
  if (state.streak) owned.add(state.streak).add(state.streak.sums);
  for (const key in state.points) {
    const ps = state.points[key] as PointsState;
    owned.add(ps).add(ps.metric).add(ps.time);
  }
}

/**
 * A copy of a state record. State records are plain objects (V8 keeps small ones in fast mode, so a copy is
 * a cheap clone; objects without a prototype are always slow dictionaries): every read goes through `own`, so
 * keys like `toString` read only their own entry, and no key is ever `__proto__` (configuration keys and ids
 * cannot be, and a stored state's are dropped when it is checked), so a write never reaches a prototype.
 */
export function copyRecord<T>(src: Readonly<Record<string, T>>): Record<string, T> {
  return { ...src };
}

/** A state record from caller input (attributes): own entries only, `__proto__` never a key. */
export function stateRecord<T>(src: Readonly<Record<string, T>> | null | undefined): Record<string, T> {
  const out: Record<string, T> = {};
  if (src) for (const k of Object.keys(src)) if (k !== '__proto__') out[k] = src[k] as T;
  return out;
}

type RecordField = 'metrics' | 'achievementProgress' | 'achievements' | 'leaderboards';

/** One of the state's records, copied on this call's first write to it. */
export function ownRecord<F extends RecordField>(step: Step, field: F): UserState[F] {
  const current = step.state[field];
  if (step.owned.has(current)) return current;
  const copy = copyRecord(current as Record<string, unknown>) as UserState[F];
  step.owned.add(copy);
  step.state[field] = copy;
  return copy;
}

/** The user record, copied (with its attributes) on this call's first write to it. */
export function ownUser(step: Step): UserRecord {
  const current = step.state.user;
  if (step.owned.has(current)) return current;
  const copy = { ...current, attributes: copyRecord(current.attributes) };
  step.owned.add(copy).add(copy.attributes);
  step.state.user = copy;
  return copy;
}

/** The streak state, copied (with its sums) on this call's first write to it. */
export function ownStreak(step: Step): StreakState {
  const current = step.state.streak as StreakState;
  if (step.owned.has(current)) return current;
  const copy = { ...current, sums: copyRecord(current.sums) };
  step.owned.add(copy).add(copy.sums);
  step.state.streak = copy;
  return copy;
}

/**
 * A points system's state whose `total` this call may write (created empty if absent), copied on the call's
 * first write to it. Its `metric` and `time` records stay shared with the prior state until written (see
 * {@link ownPointsMetric}, {@link ownPointsTime}): most awards change the total alone, and copying a record
 * nobody writes is wasted work. `anchors` is never written in place (a spend replaces it with a copy).
 */
export function ownPointsTotal(step: Step, key: string): PointsState {
  let all = step.state.points;
  if (!step.owned.has(all)) {
    all = copyRecord(all);
    step.owned.add(all);
    step.state.points = all;
  }
  const current = own(all, key);
  if (current && step.owned.has(current)) return current;
  let copy: PointsState;
  if (current) {
    copy = { total: current.total, metric: current.metric, time: current.time };
    if (current.anchors) copy.anchors = current.anchors;
  } else {
    copy = { total: 0, metric: {}, time: {} };
    step.owned.add(copy.metric).add(copy.time);
  }
  step.owned.add(copy);
  all[key] = copy;
  return copy;
}

/** A points system's state whose `total` and `metric` records this call may write (see {@link ownPointsTotal}). */
export function ownPointsMetric(step: Step, key: string): PointsState {
  return ownPointsRecord(step, key, 'metric');
}

/** A points system's state whose `total` and `time` records this call may write (see {@link ownPointsTotal}). */
export function ownPointsTime(step: Step, key: string): PointsState {
  return ownPointsRecord(step, key, 'time');
}

function ownPointsRecord(step: Step, key: string, field: 'metric' | 'time'): PointsState {
  const ps = ownPointsTotal(step, key);
  const current: Record<string, unknown> = ps[field];
  if (!step.owned.has(current)) {
    const copy = copyRecord(current);
    (ps as unknown as Record<typeof field, Record<string, unknown>>)[field] = copy;
    step.owned.add(copy);
  }
  return ps;
}

/** A points system's state, every record of which this call may write (see {@link ownPointsTotal}). */
export function ownPoints(step: Step, key: string): PointsState {
  ownPointsMetric(step, key);
  return ownPointsTime(step, key);
}

// Outside production, states are frozen, so that a mutation anywhere fails loudly instead of corrupting a
// state that stores and callers share.
const FREEZE = DEVELOPMENT;

/**
 * A state's top-level object with the same records and `notices` (absent when undefined): a plain object (see
 * PlainState) with the fields in the state's order, `checked` marking it before its optional fields (one shape
 * for every marked state with the same fields). Field by field rather than a spread: a spread of a frozen
 * state takes V8's slow path.
 */
function shallowState(state: UserState, notices: Notices | undefined, checked: boolean): UserState {
  let out = new PlainState(state);
  if (checked) out = Checked.mark(out);
  if (state.preferences !== undefined) out.preferences = state.preferences;
  if (state.yearly !== undefined) out.yearly = state.yearly;
  if (state.boosts !== undefined) out.boosts = state.boosts;
  if (notices !== undefined) out.notices = notices;
  return out;
}

/**
 * Builds a state's top-level object: a plain object (its prototype is `Object.prototype`, as a literal's), made
 * by a constructor so that V8 gives it room for the mark and the optional fields (a literal is allocated to
 * its exact size, and every later field then needs a backing store of its own).
 */
const PlainState = function (this: UserState, state: UserState) {
  this.user = state.user;
  this.metrics = state.metrics;
  this.achievementProgress = state.achievementProgress;
  this.achievements = state.achievements;
  this.streak = state.streak;
  this.points = state.points;
  this.leaderboards = state.leaderboards;
  this.rules = state.rules;
} as unknown as new (state: UserState) => UserState;
PlainState.prototype = Object.prototype;

/**
 * Marks the states this module built or checked: they need no check when they come back as a prior state.
 * The mark is a private field stamped onto the plain object (a base class whose constructor returns the
 * object it is given): invisible to JSON, keys, spreads, `structuredClone` and structural comparisons, the
 * prototype stays `Object.prototype`, and no copy (a spread, `Object.create`, a descriptor clone, parsed
 * JSON) carries it, so a copy made outside the core is checked again. Several times cheaper than a
 * non-enumerable property (`Object.defineProperty` goes through the runtime on every call), and, unlike a
 * WeakSet, nothing for the garbage collector to clear.
 */
class Stamp {
  constructor(o: object) {
    return o as Stamp;
  }
}
class Checked extends Stamp {
  #checked = true;
  static mark(state: UserState): UserState {
    // The stamped object is `state` itself (Stamp's constructor returns it). Callers use the result: a
    // bundler's tree-shaking (Rollup's, in tsup) takes a `new` or a call whose result is unused for a pure
    // allocation and drops it, and the mark with it (test/packaging.test.ts checks the built package).
    return #checked in state ? state : (new Checked(state) as unknown as UserState);
  }
  static is(state: object): boolean {
    return #checked in state;
  }
}

/**
 * A state of this module with other `notices` (core/changes.ts): the same records, a new top-level object,
 * marked as checked (and frozen outside production) like the state it comes from.
 */
export function withNotices(state: UserState, notices: Notices): UserState {
  // Only a state this module checked keeps the mark: anything else is checked again when it comes back.
  const out = shallowState(state, notices, Checked.is(state));
  if (FREEZE) {
    Object.freeze(notices);
    Object.freeze(out);
  }
  return out;
}

/** Ends a call: freezes (outside production) what it created; the state is marked as checked (createStep). */
export function sealState(step: Step): UserState {
  if (FREEZE) for (const o of step.owned) Object.freeze(o);
  return step.state;
}

/**
 * A prior state ready for a call: a state this module returned is used as it is (states are immutable
 * values); anything else (parsed JSON from a store, a value built by hand) is checked and copied once into
 * the current form, with records that have no prototype and numbers for decimal strings of older states.
 */
export function adoptState(state: UserState): UserState {
  if (typeof state === 'object' && state !== null && Checked.is(state)) return state;
  const copy = Checked.mark(checkedState(state));
  if (FREEZE) {
    const owned = new Owned(copy);
    collectOwned(copy, owned);
    for (const o of owned) Object.freeze(o);
  }
  return copy;
}

/** True when every pair of `filter` is present in `attributes`. */
export function matchesFilter(filter: Readonly<Record<string, string>> | undefined, attributes: Readonly<Record<string, string>> | undefined): boolean {
  if (!filter) return true;
  for (const key in filter) {
    if (!attributes || !Object.hasOwn(attributes, key) || attributes[key] !== filter[key]) return false;
  }
  return true;
}

/**
 * A record without inherited members: a key named `toString` or `valueOf` reads only what was stored under
 * it. Built by a constructor whose prototype is an empty, frozen object without a prototype, so V8 keeps the
 * record in fast mode (an `Object.create(null)` object is a slow dictionary from the start).
 */
export function record<T>(): Record<string, T> {
  return new NullRecord() as Record<string, T>;
}
const NullRecord = function () {} as unknown as new () => Record<string, unknown>;
NullRecord.prototype = Object.freeze(Object.create(null) as object);

/** The value stored under `key` in a record of any prototype, never an inherited member. */
export function own<T>(rec: Readonly<Record<string, T>> | null | undefined, key: string): T | undefined {
  return rec != null && Object.hasOwn(rec, key) ? rec[key] : undefined;
}

const badState = (what: string): never => {
  throw new ValidationError(`prior state is not a Laurel user state: ${what}`, [{ path: ['prior'], message: what }]);
};

function checkRecord<T>(src: unknown, what: string, copy: (v: unknown, key: string) => T): Record<string, T> {
  const out: Record<string, T> = {};
  if (src === undefined || src === null) return out;
  if (typeof src !== 'object' || Array.isArray(src)) return badState(`${what} must be an object`);
  // `__proto__` is never a configured key; kept, a write to it would reach the prototype.
  for (const k of Object.keys(src)) if (k !== '__proto__') out[k] = copy((src as Record<string, unknown>)[k], k);
  return out;
}

const str = (v: unknown, what: string): string => (typeof v === 'string' ? v : badState(`${what} must be a string`));
const strOrNull = (v: unknown, what: string): string | null => (v === null || v === undefined ? null : str(v, what));
const instant = (v: unknown, what: string): string => (typeof v === 'string' && isSupportedInstant(Date.parse(v)) ? v : badState(`${what} must be an ISO instant in the supported range`));
const zoneOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : (canonicalTimeZone(v as string) ?? badState('user.tz must be a known time zone')));
const num = (v: unknown, what: string): number => (typeof v === 'number' && Number.isFinite(v) ? v : badState(`${what} must be a finite number`));
/** A decimal: a finite number, or the decimal string an older state holds (read as the nearest number). */
const dec = (v: unknown, what: string): number => {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  const n = typeof v === 'string' && /^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i.test(v) ? Number(v) : NaN;
  return Number.isFinite(n) ? n : badState(`${what} must be a finite number`);
};

function checkedYearly(y: unknown): YearlyChanges {
  const v = y as { year?: unknown; metrics?: unknown; points?: unknown };
  const year = v.year;
  if (typeof year !== 'number' || !Number.isInteger(year)) return badState('yearly.year must be an integer');
  return { year, metrics: checkRecord(v.metrics, 'yearly.metrics', (n) => dec(n, 'yearly.metrics')), points: checkRecord(v.points, 'yearly.points', (n) => dec(n, 'yearly.points')) };
}

/**
 * Copy of a user state whose records (metrics, achievements, points, boards, attributes, sums) have no
 * prototype, so every configured key, `toString` and `valueOf` included, reads only its own entry. States
 * come from stores as parsed JSON; this is also where a malformed one is refused with a ValidationError.
 */
function checkedState(state: UserState): UserState {
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
      attributes: checkRecord(u.attributes, 'user.attributes', (v) => str(v, 'user.attributes')),
      created: instant(u.created, 'user.created'),
      updated: str(u.updated, 'user.updated'),
      ...(u.control === true ? { control: true } : {}),
    },
    metrics: checkRecord(state.metrics, 'metrics', (v) => dec(v, 'metrics')),
    achievementProgress: checkRecord(state.achievementProgress, 'achievementProgress', (v) => dec(v, 'achievementProgress')),
    achievements: checkRecord(state.achievements, 'achievements', (v) => {
      const a = v as { achievedAt?: unknown; completionId?: unknown } | null;
      return { achievedAt: str(a?.achievedAt, 'achievements.achievedAt'), completionId: str(a?.completionId, 'achievements.completionId') };
    }),
    streak:
      s === null || s === undefined
        ? null
        : typeof s !== 'object'
          ? badState('streak must be an object')
          : { ...s, sums: checkRecord(s.sums, 'streak.sums', (v) => dec(v, 'streak.sums')) },
    points: checkRecord(state.points, 'points', (v) => {
      const p = v as { total?: unknown; metric?: unknown; time?: unknown } | null;
      if (typeof p !== 'object' || p === null) return badState('points must hold objects');
      return {
        total: num(p.total, 'points.total'),
        metric: checkRecord(p.metric, 'points.metric', (m) => {
          const t = m as { sum?: unknown; hw?: unknown } | null;
          return { sum: dec(t?.sum, 'points.metric.sum'), hw: dec(t?.hw, 'points.metric.hw') };
        }),
        time: checkRecord(p.time, 'points.time', (n) => num(n, 'points.time')),
        ...(typeof (p as { anchors?: unknown }).anchors === 'object' && (p as { anchors?: unknown }).anchors !== null
          ? { anchors: checkRecord((p as { anchors: unknown }).anchors, 'points.anchors', (a) => instant(a, 'points.anchors')) }
          : {}),
      };
    }),
    leaderboards: checkRecord(state.leaderboards, 'leaderboards', (v) => {
      const b = v as Record<string, unknown> | null;
      if (typeof b !== 'object' || b === null) return badState('leaderboards must hold objects');
      const entry = (e: Record<string, unknown>): BoardEntry => ({ run: str(e.run, 'leaderboards.run'), group: str(e.group, 'leaderboards.group'), value: dec(e.value, 'leaderboards.value'), reachedAt: str(e.reachedAt, 'leaderboards.reachedAt') });
      const out: BoardState = entry(b);
      if (b.earlier !== undefined && b.earlier !== null) {
        if (!Array.isArray(b.earlier)) return badState('leaderboards.earlier must be an array');
        const earlier = b.earlier.map((e: unknown) => (typeof e === 'object' && e !== null ? entry(e as Record<string, unknown>) : badState('leaderboards.earlier must hold objects')));
        if (earlier.length > 0) out.earlier = earlier;
      }
      return out;
    }),
    rules: state.rules === undefined || state.rules === null ? '' : str(state.rules, 'rules'),
    // Set by `updatePreferences` (checked there; stores hand back what the engine wrote).
    ...(typeof state.preferences === 'object' && state.preferences !== null ? { preferences: state.preferences } : {}),
    // Set by `createBoost`/`deleteBoost` (checked there; stores hand back what the engine wrote).
    ...(Array.isArray(state.boosts) ? { boosts: state.boosts } : {}),
    // Wrapped's sums of one year (core/wrapped.ts).
    ...(typeof state.yearly === 'object' && state.yearly !== null ? { yearly: checkedYearly(state.yearly) } : {}),
    // Change notifications (core/changes.ts): written by the engine, handed back as written.
    ...(typeof state.notices === 'object' && state.notices !== null ? { notices: state.notices } : {}),
  };
}
