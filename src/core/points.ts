/**
 * Points systems (docs/rules.md, section 6): triggers, caps, blocking, boosts, levels and lazily accrued time
 * grants. Every award is cut to fit `maxPoints` and the zero floor, and an award cut to 0 is not recorded.
 */
import type { CompiledLevel, CompiledPointsSystem, CompiledTrigger, LaurelConfig } from '../config/define.js';
import { InsufficientPointsError } from '../errors.js';
import { addDays, daysBetween, localDateOf, startOfLocalDate, type LocalDate } from './calendar.js';
import { addExact, floorDivideExact, MAX_EXACT, multiplyRounded } from './decimal.js';
import { activeOn, hasUserBoosts, userBoostsIn } from './boosts.js';
import { stableId } from './ids.js';
import { instantMs, isoOf } from './instants.js';
import { awardList, copyRecord, createdAtOf, matchesFilter, own, ownPointsMetric, ownPointsTime, ownPointsTotal, record, userZone, type Step } from './step.js';
import type { AdjustmentRow, AttributePair, Award, AwardRow, GrantRun, LedgerRow, BoostView, EventPoints, LevelView, PointsState, PointsSystemView, PointsTriggerView, UserState } from './types.js';

const HOUR_MS = 3_600_000;

/** A points system's state before any award. */
export const emptyPointsState = (): PointsState => ({ total: 0, metric: {}, time: {} });

const EMPTY_POINTS: PointsState = Object.freeze({ total: 0, metric: Object.freeze({}), time: Object.freeze({}) });

/** The user's state in a system (empty for a system configured after the user was created). Read only. */
export function pointsState(state: UserState, key: string): PointsState {
  return own(state.points, key) ?? EMPTY_POINTS;
}

const triggerViews = new WeakMap<CompiledTrigger, PointsTriggerView>();

/** The wire view of a trigger: built once per trigger and shared (frozen). */
export function triggerView(t: CompiledTrigger): PointsTriggerView {
  let view = triggerViews.get(t);
  if (!view) {
    view = Object.freeze(buildTriggerView(t));
    triggerViews.set(t, view);
  }
  return view;
}

function buildTriggerView(t: CompiledTrigger): PointsTriggerView {
  const view: PointsTriggerView = { id: t.id, type: t.type, points: t.points };
  if (t.type === 'metric') Object.assign(view, { metricId: t.metricId, metricName: t.metricName, metricThreshold: t.metricThreshold });
  if (t.type === 'streak') view.streakLengthThreshold = t.streakLengthThreshold;
  if (t.type === 'achievement') Object.assign(view, { achievementId: t.achievementId, achievementName: t.achievementName });
  if (t.type === 'time') Object.assign(view, { timeUnit: t.timeUnit, timeInterval: t.timeInterval });
  if (t.type === 'metric' && hasPairs(t.eventAttributes)) view.eventAttributes = pairsOf(t.eventAttributes);
  if (hasPairs(t.userAttributes)) view.userAttributes = pairsOf(t.userAttributes);
  return view;
}

const hasPairs = (filter: Readonly<Record<string, string>> | undefined): filter is Readonly<Record<string, string>> => filter !== undefined && Object.keys(filter).length > 0;
const pairsOf = (filter: Readonly<Record<string, string>>): AttributePair[] => Object.entries(filter).map(([key, value]) => ({ key, value }));

export function systemView(ps: CompiledPointsSystem): PointsSystemView {
  return { id: ps.id, key: ps.key, name: ps.name, description: ps.description, badgeUrl: ps.badgeUrl, maxPoints: ps.maxPoints };
}

const levelViews = new WeakMap<CompiledLevel, LevelView>();

/** The wire view of a level: built once per level and shared (frozen). */
export function levelView(level: CompiledLevel): LevelView {
  let view = levelViews.get(level);
  if (!view) {
    view = Object.freeze({ id: level.id, key: level.key, name: level.name, description: level.description, badgeUrl: level.badgeUrl, points: level.points });
    levelViews.set(level, view);
  }
  return view;
}

/** The level with the highest `points` at or below `total`, or null. Levels are sorted ascending. */
export function levelFor(system: CompiledPointsSystem, total: number): LevelView | null {
  let found: CompiledLevel | null = null;
  for (const level of system.levels) {
    if (level.points <= total) found = level;
    else break;
  }
  return found ? levelView(found) : null;
}

/** Applies boosts active at `at` in the user's zone to a positive award; consumption is never boosted. */
const NO_BOOSTS: readonly BoostView[] = Object.freeze([]);

function boosted(step: Step, system: CompiledPointsSystem, raw: number, at: Date, attributes: Readonly<Record<string, string>>): { amount: number; boosts: readonly BoostView[] } {
  if (raw <= 0 || (system.boosts.length === 0 && !hasUserBoosts(step.state, system.key))) return { amount: raw, boosts: NO_BOOSTS };
  const date = at === step.now ? step.today : localDateOf(at, step.tz);
  const active: { id: string; key: string; name: string; multiplier: number; rounding: string }[] = system.boosts.filter((b) => b.start <= date && (b.end === null || date <= b.end) && matchesFilter(b.userAttributes, attributes));
  // The user's own boosts (createBoost) after the configured ones, in creation order; their key is their id.
  for (const b of userBoostsIn(step.state, system.key)) if (activeOn(b, date)) active.push({ id: b.id, key: b.id, name: b.name, multiplier: b.multiplier, rounding: b.rounding });
  if (active.length === 0) return { amount: raw, boosts: NO_BOOSTS };
  // Stacked boosts multiply first (exactly, as decimals) and round once; with several rounding modes the first
  // boost's applies.
  const rounding = (active[0]?.rounding ?? 'down') as 'up' | 'down' | 'nearest';
  const factors = [raw];
  for (const b of active) factors.push(b.multiplier);
  const amount = multiplyRounded(factors, rounding);
  return { amount, boosts: active.map((b) => ({ id: b.id, key: b.key, name: b.name, multiplier: b.multiplier })) };
}

/**
 * Makes one award: boosts, the blocking check, the caps, then the ledger row. Boosts filtered by user
 * attributes are judged by `attributes` (the user's now; for time grants, those they had when it fell due).
 * @throws {InsufficientPointsError} when `block` is set and the award would take the total below 0.
 */
export function award(step: Step, system: CompiledPointsSystem, trigger: CompiledTrigger, raw: number, at: Date, block = false, backdated = false, attributes: Readonly<Record<string, string>> = step.state.user.attributes, id?: string): void {
  const ps = pointsState(step.state, system.key);
  // The usual award has no boost to apply: no intermediate object then.
  let amount = raw;
  let boosts: readonly BoostView[] = NO_BOOSTS;
  if (raw > 0 && (system.boosts.length > 0 || hasUserBoosts(step.state, system.key))) ({ amount, boosts } = boosted(step, system, raw, at, attributes));
  if (block && amount < 0 && ps.total + amount < 0) throw new InsufficientPointsError(system.key, ps.total, Math.min(-amount, MAX_EXACT));
  let next = ps.total + amount;
  const upper = ceilingOf(system);
  const lower = floorOf(system);
  if (next > upper) next = Math.max(ps.total, upper);
  if (next < lower) next = Math.min(ps.total, lower);
  const awarded = next - ps.total;
  if (awarded === 0) return;
  book(step, system, triggerView(trigger), awarded, at, boosts.length > 0 ? (boosts as BoostView[]) : undefined, undefined, backdated, id);
}

/**
 * Books an award of `awarded` points made at `at`: the system's new total, the award for the response and
 * its ledger row (the trigger by id; `boosts` or a run of `grants`, when given, go to both). A `backdated` award
 * (one a configuration change found owed since `at`) is dated `at` but booked now: its row's `at` is now and
 * its `dated` is `at`, so charts count it when it was booked.
 */
function book(step: Step, system: CompiledPointsSystem, trigger: PointsTriggerView, awarded: number, at: Date, boosts: BoostView[] | undefined, grants: GrantRun | undefined, backdated = false, id = step.newId()): void {
  const ps = ownPointsTotal(step, system.key);
  ps.total += awarded;
  const date = at === step.now ? step.nowIso : isoOf(at.getTime());
  // Keys in the order the award and its row have always had (`boosts` or `grants` after the trigger).
  const made: Award = { id, awarded, date, total: ps.total, trigger };
  const row: AwardRow = { trigger: trigger.id, type: trigger.type };
  if (boosts !== undefined) made.boosts = row.boosts = boosts;
  if (grants !== undefined) made.grants = row.grants = grants;
  if (backdated) row.dated = date;
  if (trigger.reason !== undefined) row.reason = trigger.reason;
  // A spend restarts the schedule of the system's `anchor: 'lastSpend'` time triggers (grants already due were
  // materialised at the start of the call, before anything was spent).
  if (awarded < 0 && trigger.type !== 'time' && system.spendAnchored) {
    ownPointsTime(step, system.key);
    const anchors = ps.anchors ? copyRecord(ps.anchors) : record<string>();
    for (const t of system.timeTriggers) {
      if (t.type !== 'time' || t.anchor !== 'lastSpend') continue;
      anchors[t.id] = date;
      ps.time[t.id] = 0;
    }
    ps.anchors = anchors;
  }
  awardList(step, system.key).push(made);
  step.effects.ledger.push({ id: made.id, userId: step.state.user.id, kind: 'points', key: system.key, at: backdated ? step.nowIso : date, delta: awarded, total: ps.total, data: row });
}

/** The trigger id every explicit adjustment (`adjustPoints`) is booked under. */
export const ADJUSTMENT_TRIGGER_ID = 'adjustment';

/**
 * An explicit grant (positive) or spend (negative) of `amount` points (`adjustPoints`): an award with trigger
 * type `adjustment` and the reason. A grant stops at `maxPoints`; a spend below the system's floor (0 unless
 * `allowNegative`) fails whole. Returns the points actually added (0 when a grant finds the cap reached).
 * @throws {InsufficientPointsError} when a spend would take the balance below the floor.
 */
export function adjust(step: Step, system: CompiledPointsSystem, amount: number, reason: string | null): number {
  const ps = pointsState(step.state, system.key);
  if (amount < 0 && ps.total + amount < floorOf(system)) throw new InsufficientPointsError(system.key, ps.total, -amount);
  const next = amount > 0 ? Math.min(ps.total + amount, Math.max(ps.total, ceilingOf(system))) : ps.total + amount;
  const awarded = next - ps.total;
  if (awarded === 0) return 0;
  const view: PointsTriggerView = { id: ADJUSTMENT_TRIGGER_ID, type: 'adjustment', points: amount };
  if (reason !== null) view.reason = reason;
  book(step, system, view, awarded, step.now, undefined, undefined);
  return awarded;
}

/** The highest total a system allows: `maxPoints`, and never above the exact range (2^53 - 1). */
export const ceilingOf = (system: CompiledPointsSystem) => (system.maxPoints === null ? MAX_EXACT : Math.min(system.maxPoints, MAX_EXACT));
/** The lowest total a system allows: 0, or with `allowNegative` the exact range's lower end. */
const floorOf = (system: CompiledPointsSystem) => (system.allowNegative ? -MAX_EXACT : 0);

/** `user_creation` triggers: the starting balance, for a user who has the trigger's attributes at creation. */
export function awardCreation(step: Step): void {
  const created = new Date(step.state.user.created);
  for (const system of step.cfg.pointsSystems) {
    for (const t of system.creationTriggers) {
      if (matchesFilter(t.userAttributes, step.state.user.attributes)) award(step, system, t, t.points, created);
    }
  }
}

/** What a time trigger's schedule counts from: the user's creation, or (`anchor: 'lastSpend'`) the last spend. */
interface Anchor {
  ms: number;
  /** Local date of `ms` in the user's zone (for `day` triggers). */
  date: string;
}

/**
 * What the schedule of time grants reads of a call: the state, `now`, the user's zone and local date, and the
 * creation instant once parsed (a Step has all of them; `nextGrants` builds just these).
 */
type GrantClock = Pick<Step, 'state' | 'now' | 'tz' | 'today' | 'createdAt'>;

function anchorOf(step: GrantClock, ps: PointsState, t: CompiledTrigger, created: Anchor): Anchor {
  const spent = t.type === 'time' && t.anchor === 'lastSpend' ? own(ps.anchors, t.id) : undefined;
  if (spent === undefined) return created;
  const ms = Date.parse(spent);
  return { ms, date: localDateOf(ms, step.tz) };
}

function createdAnchor(step: GrantClock): Anchor {
  return createdAtOf(step);
}

function timeGrantsDue(step: GrantClock, t: CompiledTrigger, from: Anchor): number {
  if (t.type !== 'time') return 0;
  if (t.timeUnit === 'hour') return Math.max(0, Math.floor((step.now.getTime() - from.ms) / (t.timeInterval * HOUR_MS)));
  return Math.max(0, Math.floor(daysBetween(from.date, step.today) / t.timeInterval));
}

/** How many grants of time trigger `t` have fallen due by the call's `now` since its anchor (creation or last spend). */
export function timeGrantsDueNow(step: Step, t: CompiledTrigger): number {
  return timeGrantsDue(step, t, anchorOf(step, pointsState(step.state, t.systemKey), t, createdAnchor(step)));
}

function timeGrantInstant(step: GrantClock, t: CompiledTrigger, k: number, from: Anchor): Date {
  if (t.type === 'time' && t.timeUnit === 'hour') return new Date(from.ms + k * t.timeInterval * HOUR_MS);
  const interval = t.type === 'time' ? t.timeInterval : 1;
  return startOfLocalDate(addDays(from.date, k * interval), step.tz);
}

/** The clock of a read at `now` (no Step: nothing is booked). */
function grantClock(cfg: LaurelConfig, state: UserState, now: Date): GrantClock {
  const tz = userZone(cfg, state);
  return { state, now, tz, today: localDateOf(now, tz), createdAt: null };
}

/** When time trigger `t` next grants (ms), or null when it will not by itself (see {@link nextGrants}). */
function nextGrantMs(clock: GrantClock, system: CompiledPointsSystem, ps: PointsState, t: CompiledTrigger, created: Anchor): number | null {
  const blocked = !matchesFilter(t.userAttributes, clock.state.user.attributes) || (t.points > 0 ? ps.total >= ceilingOf(system) : ps.total <= floorOf(system));
  return blocked ? null : timeGrantInstant(clock, t, (own(ps.time, t.id) ?? 0) + 1, anchorOf(clock, ps, t, created)).getTime();
}

/**
 * When each time trigger of a system next grants, as of the step's `now` (ISO), or null when it will not
 * by itself: the user lacks its attributes, or the balance sits at the cap (floor, for a negative trigger).
 */
export function nextGrants(cfg: LaurelConfig, state: UserState, now: Date, system: CompiledPointsSystem): Record<string, string | null> {
  const clock = grantClock(cfg, state, now);
  const out = record<string | null>();
  const ps = pointsState(state, system.key);
  const created = createdAnchor(clock);
  for (const t of system.timeTriggers) {
    const ms = nextGrantMs(clock, system, ps, t, created);
    out[t.key] = ms === null ? null : new Date(ms).toISOString();
  }
  return out;
}

/**
 * Adds to `into` the instant (ms) each time trigger of every system next grants (see {@link nextGrants}),
 * leaving out those that will not by themselves: what a user's next due instant is made of, without ISO
 * strings formatted and parsed back. Throws as `nextGrants` does for an instant no Date can hold.
 */
export function pushNextGrantInstants(cfg: LaurelConfig, state: UserState, now: Date, into: number[]): void {
  let clock: GrantClock | null = null;
  for (const system of cfg.pointsSystems) {
    if (system.timeTriggers.length === 0) continue;
    clock ??= grantClock(cfg, state, now);
    const ps = pointsState(state, system.key);
    const created = createdAnchor(clock);
    for (const t of system.timeTriggers) {
      const ms = nextGrantMs(clock, system, ps, t, created);
      if (ms === null) continue;
      // What formatting it would have thrown for (an instant beyond the Date range).
      if (!Number.isFinite(ms)) new Date(ms).toISOString();
      into.push(ms);
    }
  }
}

/**
 * Materialises every time grant due by `now`, in date order across a system's time triggers, each dated at
 * the instant it fell due. Grants that a cap would cut to 0 are skipped in one step, so a user idle for a
 * year at a full tank costs no more than one idle for an hour.
 *
 * A trigger with `userAttributes` pays only grants that fell due while the user had them. Attributes change
 * only at calls, so every grant due since the previous call is judged by the attributes the user had in
 * between (`step.attributesBefore`, before this call's upsert): a trigger whose filter they do not match
 * passes those grants by (counted as settled, never paid later). Its schedule stays the one from the user's
 * creation: a user who gains the attributes at a call gets the grants that fall due after it.
 */
export function accrueTimeGrants(step: Step): void {
  if (!step.cfg.index.hasTimeTriggers) return;
  const created = createdAnchor(step);
  for (const system of step.cfg.pointsSystems) {
    if (system.timeTriggers.length === 0) continue;
    let ps = pointsState(step.state, system.key);
    // Most calls find nothing due: that is told without building the pending list.
    let anyDue = false;
    for (const t of system.timeTriggers) {
      if ((own(ps.time, t.id) ?? 0) + 1 <= timeGrantsDue(step, t, anchorOf(step, ps, t, created))) {
        anyDue = true;
        break;
      }
    }
    if (!anyDue) continue;
    const pending: PendingGrants[] = [];
    for (const t of system.timeTriggers) {
      const anchor = anchorOf(step, ps, t, created);
      pending.push({ t, anchor, next: (own(ps.time, t.id) ?? 0) + 1, due: timeGrantsDue(step, t, anchor) });
    }
    ps = ownPointsTime(step, system.key);
    for (const p of pending) {
      if (p.next > p.due || matchesFilter(p.t.userAttributes, step.attributesBefore)) continue;
      p.next = p.due + 1;
      ps.time[p.t.id] = p.due;
    }
    for (;;) {
      const live: PendingGrants[] = [];
      let allAtCap = true;
      let allPositive = true;
      let allNegative = true;
      for (const p of pending) {
        if (p.next > p.due) continue;
        live.push(p);
        const points = p.t.points;
        if (!((points > 0 && ps.total >= ceilingOf(system)) || (points < 0 && ps.total <= floorOf(system)))) allAtCap = false;
        if (!(points > 0)) allPositive = false;
        if (!(points < 0)) allNegative = false;
      }
      if (live.length === 0) break;
      if (allAtCap && (allPositive || allNegative)) {
        for (const p of live) {
          p.next = p.due + 1;
          ps.time[p.t.id] = p.due;
        }
        break;
      }
      let first = live[0] as PendingGrants;
      let firstAt = timeGrantInstant(step, first.t, first.next, first.anchor);
      for (let i = 1; i < live.length; i++) {
        const p = live[i] as PendingGrants;
        const at = timeGrantInstant(step, p.t, p.next, p.anchor);
        if (at < firstAt) {
          first = p;
          firstAt = at;
        }
      }
      // A run of this trigger's grants that no cap cuts and no other trigger's grant interrupts is one award
      // and one ledger row, so the cost of a call does not grow with how long the user was idle.
      const count = system.boosts.length === 0 && !hasUserBoosts(step.state, system.key) ? runLength(step, system, ps.total, first, live) : 1;
      // A read's grants (committed by no one) take an id derived from the grant, so that every read shows the
      // same; a write's take one from newId, unique among the user's rows whatever re-timed the schedule.
      const id = step.view ? grantId(step, system, first.t, firstAt, count) : undefined;
      if (count > 1) awardRun(step, system, first.t, count, firstAt, id, first.t.type === 'time' && first.t.timeUnit === 'day' ? addDays(first.anchor.date, first.next * first.t.timeInterval) : undefined);
      else award(step, system, first.t, first.t.points, firstAt, false, false, step.attributesBefore, id);
      first.next += count;
      ps.time[first.t.id] = first.next - 1;
    }
  }
}

interface PendingGrants {
  t: CompiledTrigger;
  anchor: Anchor;
  next: number;
  due: number;
}

/**
 * How many consecutive grants of `first`, from its next one, can be made as one run: all due, each whole
 * under the caps, and each before the next grant of every other live trigger (on equal instants the trigger
 * listed first goes first, as one grant at a time would have it).
 */
function runLength(step: Step, system: CompiledPointsSystem, total: number, first: PendingGrants, live: readonly PendingGrants[]): number {
  const points = first.t.points;
  let n = first.due - first.next + 1;
  n = Math.min(n, points > 0 ? Math.floor((ceilingOf(system) - total) / points) : Math.floor((total - floorOf(system)) / -points));
  if (n <= 1) return 1;
  const order = system.timeTriggers.indexOf(first.t);
  for (const other of live) {
    if (other === first) continue;
    const bound = timeGrantInstant(step, other.t, other.next, other.anchor).getTime();
    const goesFirst = order < system.timeTriggers.indexOf(other.t);
    // The largest m with grant (next + m - 1) before `bound` (or at it, when `first` goes first on ties).
    let lo = 1;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      const at = timeGrantInstant(step, first.t, first.next + mid - 1, first.anchor).getTime();
      if (at < bound || (goesFirst && at === bound)) lo = mid;
      else hi = mid - 1;
    }
    n = lo;
  }
  return n;
}

/** Makes `count` grants of a time trigger, the first falling due at `at`, as one award and one ledger row. */
function awardRun(step: Step, system: CompiledPointsSystem, trigger: CompiledTrigger, count: number, at: Date, id: string | undefined, date: LocalDate | undefined): void {
  if (trigger.type !== 'time') return;
  const run: GrantRun = { count, unit: trigger.timeUnit, every: trigger.timeInterval, tz: step.tz };
  // The first grant's date, where the zone skipped it (its instant reads as the next date).
  if (date !== undefined && trigger.timeUnit === 'day' && localDateOf(at, step.tz) !== date) run.date = date;
  book(step, system, triggerView(trigger), trigger.points * count, at, undefined, run, false, id);
}

/**
 * The id a read gives a due time grant's award (a run of `count` grants of `trigger`, the first due at `at`):
 * derived from the grant, not drawn from `newId`, so that a grant due but not yet stored keeps one id across
 * reads (each read materialises it again, committing nothing) and reads draw no ids. The write that stores
 * the grant gives it an id from `newId`: a derived id could repeat among a user's rows once a schedule is
 * re-timed (a spend restarting it, a changed interval, a clock moving back, a retroactive replay).
 */
function grantId(step: Step, system: CompiledPointsSystem, trigger: CompiledTrigger, at: Date, count: number): string {
  const user = step.state.user;
  return stableId('grant', `${user.id}\u0000${user.created}\u0000${system.key}\u0000${trigger.id}\u0000${at.getTime()}\u0000${count}`);
}

/** The instant (ms) of grant `j` (0-based) of a run whose first grant fell due at `first`. */
export function grantInstant(first: string, run: GrantRun, j: number): number {
  if (run.unit === 'hour') return instantMs(first) + j * run.every * HOUR_MS;
  return startOfLocalDate(addDays(run.date ?? localDateOf(new Date(first), run.tz), j * run.every), run.tz).getTime();
}

/** How many grants of a run (first due at `first`) fell due strictly before `boundMs`. */
export function grantsBefore(first: string, run: GrantRun, boundMs: number): number {
  if (run.unit === 'hour') {
    // Evenly spaced instants: the count is a quotient (checked against the instants themselves, so that
    // rounding cannot move it), whatever the length of the run; a binary search over a year of hourly grants
    // would cost a dozen instants.
    const firstMs = instantMs(first);
    if (!(boundMs > firstMs)) return 0;
    let n = Math.ceil((boundMs - firstMs) / (run.every * HOUR_MS));
    if (!(n >= 0)) n = 0;
    if (n > run.count) n = run.count;
    while (n > 0 && !(firstMs + (n - 1) * run.every * HOUR_MS < boundMs)) n--;
    while (n < run.count && firstMs + n * run.every * HOUR_MS < boundMs) n++;
    return n;
  }
  let lo = 0;
  let hi = run.count;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (grantInstant(first, run, mid) < boundMs) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Metric triggers for the event's metric: once per threshold of growth of the filtered high-water mark. */
export function awardMetricTriggers(step: Step, system: CompiledPointsSystem, metricKey: string, value: number, attributes: Record<string, string> | undefined): void {
  const triggers = system.metricTriggers.get(metricKey);
  if (!triggers) return;
  // The system's own state, once: an award in between writes the same object.
  let ps: PointsState | null = null;
  for (const t of triggers) {
    if (t.type !== 'metric') continue;
    if (!matchesFilter(t.eventAttributes, attributes) || !matchesFilter(t.userAttributes, step.state.user.attributes)) continue;
    ps ??= ownPointsMetric(step, system.key);
    const track = own(ps.metric, t.id);
    const sum = addExact(track?.sum ?? 0, value);
    let hw = track?.hw ?? 0;
    let times = 0;
    if (sum > hw) {
      times = floorDivideExact(sum, t.metricThreshold) - floorDivideExact(hw, t.metricThreshold);
      hw = sum;
    }
    ps.metric[t.id] = { sum, hw };
    if (times > 0) award(step, system, t, t.points * times, step.now, t.blockIfOutOfPoints === true);
  }
}

/**
 * Streak triggers: each time the streak length reaches a multiple of the threshold. A restored streak
 * (`restoreStreak`) is paid what one streak that had never been lost would have been paid by its length,
 * less what the lost streak and the streak begun since were paid as they grew (each its own multiples).
 */
export function awardStreakTriggers(step: Step, system: CompiledPointsSystem): void {
  const restored = step.streakRestored;
  if (!step.streakExtended && restored === null) return;
  const length = step.state.streak?.length ?? 0;
  for (const t of system.streakTriggers) {
    if (t.type !== 'streak') continue;
    const every = t.streakLengthThreshold;
    const times = restored === null ? (length % every === 0 ? 1 : 0) : Math.floor(length / every) - Math.floor(restored.lost / every) - Math.floor(restored.since / every);
    if (times <= 0 || !matchesFilter(t.userAttributes, step.state.user.attributes)) continue;
    award(step, system, t, t.points * times, step.now, t.blockIfOutOfPoints === true);
  }
}

/** Achievement triggers for the achievements unlocked in this call. */
export function awardAchievementTriggers(step: Step, system: CompiledPointsSystem): void {
  for (const a of step.unlocked) {
    for (const t of system.achievementTriggers.get(a.key) ?? []) {
      if (t.type !== 'achievement' || !matchesFilter(t.userAttributes, step.state.user.attributes)) continue;
      award(step, system, t, t.points, step.now, t.blockIfOutOfPoints === true);
    }
  }
}

/** The response's `points`: each system whose total changed in this call. */
export function eventPoints(step: Step): Record<string, EventPoints> {
  const out = record<EventPoints>();
  for (const system of step.cfg.pointsSystems) {
    const awards = step.awards.get(system.key);
    if (!awards || awards.length === 0) continue;
    const total = pointsState(step.state, system.key).total;
    let added = 0;
    for (const a of awards) added += a.awarded;
    out[system.key] = {
      id: system.id,
      key: system.key,
      name: system.name,
      description: system.description,
      badgeUrl: system.badgeUrl,
      maxPoints: system.maxPoints,
      total,
      level: levelFor(system, total),
      added,
      awards,
    };
  }
  return out;
}

const triggersById = new WeakMap<CompiledPointsSystem, Map<string, CompiledTrigger>>();

/**
 * The award a points ledger row records, its trigger's view taken from the configuration. A row whose
 * trigger has since left the configuration shows the trigger's id and type with the amount it awarded; rows
 * written before 0.2 hold the whole award and read as stored.
 */
export function awardOfRow(system: CompiledPointsSystem, row: LedgerRow): Award {
  const data = row.data as AwardRow | Award | null;
  if (data !== null && typeof (data as Award).trigger === 'object') return data as Award;
  let byId = triggersById.get(system);
  if (!byId) triggersById.set(system, (byId = new Map(system.triggers.map((t) => [t.id, t]))));
  const compact = data as AwardRow | null;
  const trigger = compact && compact.type !== 'adjustment' ? (byId.get(compact.trigger) ?? system.legacyTriggerIds.get(compact.trigger)) : undefined;
  const made: Award = {
    id: row.id,
    awarded: row.delta,
    date: compact?.dated ?? row.at,
    total: row.total,
    trigger: trigger ? triggerView(trigger) : { id: compact?.trigger ?? '', type: compact?.type ?? 'metric', points: row.delta },
  };
  if (compact?.reason !== undefined) made.trigger = { ...made.trigger, reason: compact.reason };
  if (compact?.boosts) made.boosts = compact.boosts;
  if (compact?.grants) made.grants = compact.grants;
  return made;
}

/** True for a points row that is an adjustment (a clamp to a lowered cap, a replay correction), not an award. */
export function isAdjustment(row: LedgerRow): boolean {
  return row.data !== null && typeof (row.data as AdjustmentRow).adjustment === 'string';
}

/** Systems known to the configuration, for reads. */
export function findSystem(cfg: LaurelConfig, key: string): CompiledPointsSystem | undefined {
  return cfg.index.pointsSystems.get(key);
}
