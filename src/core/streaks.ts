/**
 * Streaks (docs/rules.md, section 5): one per user, in the user's zone, maintained lazily. Missed periods,
 * consumed freezes and earned freezes are all derived from the stored state and `now`, so a read at any
 * time is right without a scheduler, and the next write materialises what the read showed.
 */
import type { CompiledStreak, LaurelConfig } from '../config/define.js';
import {
  addDays,
  daysBetween,
  nextPeriodStart,
  periodEndOf,
  periodStartOf,
  previousPeriodStart,
  shiftPeriod,
  startOfLocalDate,
  type LocalDate,
} from './calendar.js';
import { addExact } from './decimal.js';
import { createdAtOf, own, ownStreak, type Step } from './step.js';
import type { EventStreak, StreakPause, StreakPeriodRow, StreakState, StreakView, UserState } from './types.js';

/** Whether the streak period from `start` to `end` overlaps one of the user's pauses. */
export function pausedPeriod(pauses: readonly StreakPause[] | undefined, start: LocalDate, end: LocalDate): boolean {
  if (!pauses) return false;
  for (const p of pauses) if (p.start <= end && p.end >= start) return true;
  return false;
}

/** A fresh streak state (used when a streak is configured after the user was created). */
export function emptyStreak(streak: CompiledStreak): StreakState {
  return {
    length: 0,
    started: null,
    coveredThrough: null,
    progressPeriod: null,
    sums: {},
    qualified: false,
    freezes: streak.freezes ? Math.min(streak.freezes.initial, streak.freezes.max) : 0,
    freezeGrants: 0,
    lastExtendedAt: null,
  };
}

/** The freezes a user holds under `cfg`: a count above a lowered `freezes.max` is brought down to it. */
export function freezesHeld(cfg: CompiledStreak, freezes: number): number {
  const max = cfg.freezes?.max;
  return max !== undefined && freezes > max ? max : freezes;
}

/**
 * Brings the streak up to `step.now`: each whole period missed since the last covered one consumes a freeze
 * (earned freezes first, in date order) or breaks the streak. Frozen periods become ledger rows.
 */
export function advanceStreak(step: Step): void {
  const cfg = step.cfg.streak;
  if (!cfg) return;
  const state = step.state;
  if (!state.streak) {
    state.streak = emptyStreak(cfg);
    step.owned.add(state.streak).add(state.streak.sums);
  }
  // A lowered `freezes.max` applies from the user's next call (read or write) on, before anything else.
  const held = freezesHeld(cfg, state.streak.freezes);
  if (held !== state.streak.freezes) ownStreak(step).freezes = held;
  let s = state.streak;
  const freq = cfg.frequency;
  const current = periodStartOf(step.today, freq, step.cfg.weekStartsOn);
  if (s.length > 0 && s.coveredThrough !== null && s.coveredThrough < current) {
    let p = nextPeriodStart(s.coveredThrough, freq);
    while (p < current) {
      const end = periodEndOf(p, freq);
      earnFreezesUpTo(step, end);
      s = ownStreak(step);
      if (pausedPeriod(s.pauses, p, end)) {
        // A pause keeps the streak through the period without a freeze and without adding to its length.
        s.coveredThrough = p;
        const row: StreakPeriodRow = { periodStart: p, periodEnd: end, length: s.length, usedFreeze: false, usedPause: true, rule: step.cfg.rules.streak };
        const at = startOfLocalDate(addDays(end, 1), step.tz).toISOString();
        step.effects.ledger.push({ id: step.newId(), userId: state.user.id, kind: 'streak', key: 'streak', at, delta: 0, total: s.length, data: row });
        p = nextPeriodStart(p, freq);
      } else if (cfg.freezes && s.freezes > 0) {
        s.freezes -= 1;
        s.coveredThrough = p;
        const row: StreakPeriodRow = { periodStart: p, periodEnd: end, length: s.length, usedFreeze: true, rule: step.cfg.rules.streak };
        // A freeze is consumed when the missed period ends: at the start of the next local day.
        const at = startOfLocalDate(addDays(end, 1), step.tz).toISOString();
        step.effects.ledger.push({ id: step.newId(), userId: state.user.id, kind: 'streak', key: 'streak', at, delta: 0, total: s.length, data: row });
        p = nextPeriodStart(p, freq);
      } else {
        // Kept for `restoreStreak`: the length it had and the first period it missed.
        s.lost = { length: s.length, started: s.started, period: p };
        s.length = 0;
        s.started = null;
        break;
      }
    }
  }
  // Pauses over before the current period can no longer keep anything.
  if (s.pauses && s.pauses.some((x) => x.end < current)) {
    s = ownStreak(step);
    const left = (s.pauses as StreakPause[]).filter((x) => x.end >= current);
    if (left.length > 0) s.pauses = left;
    else delete s.pauses;
  }
  earnFreezesUpTo(step, step.today);
}

/**
 * Adds the freezes auto-earned (every `everyDays` days since the user's creation, in the user's zone) up to
 * `date`, capped at the configured maximum. A module function, not a closure: it runs on every call.
 */
function earnFreezesUpTo(step: Step, date: LocalDate): void {
  const freezes = step.cfg.streak?.freezes;
  const auto = freezes?.autoEarn;
  if (!freezes || !auto) return;
  const due = Math.floor(daysBetween(createdAtOf(step).date, date) / auto.everyDays);
  const before = step.state.streak as StreakState;
  if (due > before.freezeGrants) {
    const s = ownStreak(step);
    s.freezes = Math.min(freezes.max, s.freezes + auto.amount * (due - s.freezeGrants));
    s.freezeGrants = due;
  }
}

/**
 * The streak rule a user's preferences set (`mode`, `metrics`), where the configuration's
 * `streak.customization` still allows it: every metric among those it lists and every threshold within its
 * bounds. A rule it no longer allows (the customization removed or narrowed) is kept in the preferences but
 * not applied: the configuration's rule counts for that user, as the preferences' view says.
 */
export function streakRuleOf(cfg: CompiledStreak, prefs: UserState['preferences']): { mode: 'any' | 'all'; metrics: CompiledStreak['metrics'] } {
  const mine = prefs?.streak;
  const custom = cfg.customization;
  if (custom === null || mine === undefined || (mine.mode === undefined && mine.metrics === undefined)) return { mode: cfg.mode, metrics: cfg.metrics };
  const allowed = mine.metrics === undefined || mine.metrics.every((m) => custom.metrics.includes(m.key) && (custom.minThreshold === null || m.threshold >= custom.minThreshold) && (custom.maxThreshold === null || m.threshold <= custom.maxThreshold));
  if (!allowed) return { mode: cfg.mode, metrics: cfg.metrics };
  return { mode: mine.mode ?? cfg.mode, metrics: mine.metrics ?? cfg.metrics };
}

/** Adds the event's value to the current period's progress and extends the streak when the period qualifies. */
export function recordStreakProgress(step: Step, metricKey: string, value: number): void {
  const cfg = step.cfg.streak;
  if (!cfg || !step.state.streak) return;
  // A user's own streak rule (`updatePreferences`, within the configuration's guardrails); off: no streak.
  const prefs = step.state.preferences;
  if (prefs?.streak?.enabled === false) return;
  const { metrics, mode } = prefs === undefined ? cfg : streakRuleOf(cfg, prefs);
  let s: StreakState = step.state.streak;
  const current = periodStartOf(step.today, cfg.frequency, step.cfg.weekStartsOn);
  if (s.progressPeriod !== current) {
    // A zone change can move "today" back before the period progress was counting: to a period already
    // counted, which never counts again (progress stays where it is); to one not counted yet, which counts,
    // and progress moves to it (the later period's sums so far, none of which qualified it, are dropped).
    if (s.progressPeriod !== null && current < s.progressPeriod && s.coveredThrough !== null && current <= s.coveredThrough) return;
    s = ownStreak(step);
    s.progressPeriod = current;
    s.sums = {};
    step.owned.add(s.sums);
    s.qualified = false;
  }
  // The period's sum of a metric the rule in force counts, or that a rule the user may choose counts (the
  // configuration's customization lists it, or the configuration's rule): a rule changed mid-period counts
  // the period's sums so far.
  const custom = cfg.customization;
  const counted = (list: CompiledStreak['metrics']) => list !== null && list !== undefined && list.some((m) => m.key === metricKey);
  // (The configuration's own rule too: a user may go back to it.)
  if (counted(metrics) || (custom !== null && (custom.metrics.includes(metricKey) || counted(cfg.metrics)))) {
    s = ownStreak(step);
    s.sums[metricKey] = addExact(own(s.sums, metricKey) ?? 0, value);
  }
  let qualifies: boolean;
  if (!metrics) {
    qualifies = value > 0;
  } else {
    const sums = s.sums;
    const met = (m: { key: string; threshold: number }) => (own(sums, m.key) ?? 0) >= m.threshold;
    qualifies = mode === 'all' ? metrics.every(met) : metrics.some(met);
  }
  if (!qualifies || s.qualified) return;
  s = ownStreak(step);
  s.qualified = true;
  if (s.coveredThrough !== null && s.coveredThrough >= current) return; // already counted (zone moved west)
  if (s.length > 0) {
    s.length += 1;
  } else {
    s.length = 1;
    s.started = step.today;
  }
  s.coveredThrough = current;
  s.lastExtendedAt = step.nowIso;
  step.streakExtended = true;
  const row: StreakPeriodRow = { periodStart: current, periodEnd: periodEndOf(current, cfg.frequency), length: s.length, usedFreeze: false, rule: step.cfg.rules.streak };
  step.effects.ledger.push({ id: step.newId(), userId: step.state.user.id, kind: 'streak', key: 'streak', at: step.nowIso, delta: 1, total: s.length, data: row });
}

/** The last date to act without losing the streak or using a freeze: the end of the first unpaused period after the last covered one. */
function expiresOn(s: StreakState, frequency: CompiledStreak['frequency']): LocalDate {
  const covered = s.coveredThrough as LocalDate;
  // Without pauses the answer depends on the last covered period alone, which most users share (today's).
  if (!s.pauses && lastExpiry.covered === covered && lastExpiry.frequency === frequency) return lastExpiry.expires;
  let next = nextPeriodStart(covered, frequency);
  while (pausedPeriod(s.pauses, next, periodEndOf(next, frequency))) next = nextPeriodStart(next, frequency);
  const expires = periodEndOf(next, frequency);
  if (!s.pauses) {
    lastExpiry.covered = covered;
    lastExpiry.frequency = frequency;
    lastExpiry.expires = expires;
  }
  return expires;
}
const lastExpiry: { covered: LocalDate; frequency: string; expires: LocalDate } = { covered: '', frequency: '', expires: '' };

/** The period containing `today` (start and end), remembered for the last date asked: calls share today. */
function currentPeriod(today: LocalDate, frequency: CompiledStreak['frequency'], weekStartsOn: LaurelConfig['weekStartsOn']): { start: LocalDate; end: LocalDate } {
  const last = lastPeriod;
  if (last.today === today && last.frequency === frequency && last.weekStartsOn === weekStartsOn) return last;
  const start = periodStartOf(today, frequency, weekStartsOn);
  lastPeriod = { today, frequency, weekStartsOn, start, end: periodEndOf(start, frequency) };
  return lastPeriod;
}
let lastPeriod: { today: LocalDate; frequency: string; weekStartsOn: number; start: LocalDate; end: LocalDate } = { today: '', frequency: '', weekStartsOn: -1, start: '', end: '' };

/** The wire view of a user's streak as of `today` (call after `advanceStreak`). */
export function streakView(cfg: LaurelConfig, state: UserState | null, today: LocalDate): StreakView {
  const sc = cfg.streak;
  if (!sc) return { length: 0, frequency: 'daily', started: null, periodStart: null, periodEnd: null, expires: null };
  const s = state?.streak ?? emptyStreak(sc);
  const current = currentPeriod(today, sc.frequency, cfg.weekStartsOn);
  const view: StreakView = {
    length: s.length,
    frequency: sc.frequency,
    started: s.length > 0 ? s.started : null,
    periodStart: current.start,
    periodEnd: current.end,
    expires: s.length > 0 && s.coveredThrough ? expiresOn(s, sc.frequency) : null,
  };
  if (sc.freezes) {
    view.freezes = s.freezes;
    view.maxFreezes = sc.freezes.max;
    if (sc.freezes.autoEarn) {
      view.freezeAutoEarnInterval = sc.freezes.autoEarn.everyDays;
      view.freezeAutoEarnAmount = sc.freezes.autoEarn.amount;
    }
  }
  return view;
}

export function eventStreak(step: Step): EventStreak {
  const view = streakView(step.cfg, step.state, step.today) as EventStreak;
  view.extended = step.streakExtended;
  return view;
}

/** When the streak was last extended, or null while it is not active (length 0), as the hosted service reads it. */
export function extendedAt(state: UserState): string | null {
  return (state.streak?.length ?? 0) > 0 ? (state.streak?.lastExtendedAt ?? null) : null;
}

/**
 * One period of a streak's history (`Engine.getStreak`): its dates, the streak's length at its end, and
 * whether a freeze or a pause kept the streak through it.
 *
 * @inline
 */
export interface StreakHistoryEntry {
  periodStart: LocalDate;
  periodEnd: LocalDate;
  length: number;
  /** Present only when the configuration has streak freezes (the hosted service's rule). */
  usedFreeze?: boolean;
  /** Whether a pause kept the streak through the period. */
  usedPause: boolean;
}

/**
 * The last `periods` periods up to and including the current one, oldest first, from the streak rows of
 * the ledger (`rows`, any order) and the current state. A period without a row reads 0, except the current
 * period while the streak is still alive, which reads the live length.
 */
export function streakHistory(cfg: LaurelConfig, state: UserState, today: LocalDate, periods: number, rows: readonly StreakPeriodRow[]): StreakHistoryEntry[] {
  const sc = cfg.streak;
  if (!sc) return [];
  // Rows counted under an earlier streak rule are history of a streak the configuration no longer has (a
  // change of rule writes the streak recomputed under the new one); rows from before 0.3 carry no rule.
  const byPeriod = new Map<string, StreakPeriodRow>();
  for (const r of rows) if (r.rule === undefined || r.rule === cfg.rules.streak) byPeriod.set(r.periodStart, r);
  const current = periodStartOf(today, sc.frequency, cfg.weekStartsOn);
  const s = state.streak;
  const alive = !!s && s.length > 0 && s.coveredThrough !== null && s.coveredThrough >= previousPeriodStart(current, sc.frequency);
  const out: StreakHistoryEntry[] = [];
  for (let i = periods - 1; i >= 0; i--) {
    const p = shiftPeriod(current, -i, sc.frequency);
    const row = byPeriod.get(p);
    const entry: StreakHistoryEntry = { periodStart: p, periodEnd: periodEndOf(p, sc.frequency), length: 0, usedPause: row?.usedPause === true };
    if (sc.freezes) entry.usedFreeze = row?.usedFreeze ?? false;
    if (row) {
      entry.length = row.length;
    } else if (i === 0 && alive && s) {
      entry.length = s.length;
    }
    out.push(entry);
  }
  return out;
}

/** The first instant of the period `periods - 1` periods before the current one (for ledger range reads). */
export function historyWindowStart(cfg: LaurelConfig, today: LocalDate, periods: number, tz: string): Date {
  const sc = cfg.streak;
  if (!sc) return new Date(0);
  const first = shiftPeriod(periodStartOf(today, sc.frequency, cfg.weekStartsOn), -(periods - 1), sc.frequency);
  // Two days of slack: rows are dated in the zone of their time and the user may have moved since.
  return startOfLocalDate(addDays(first, -2), tz);
}
