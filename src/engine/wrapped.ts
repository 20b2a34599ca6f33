/**
 * `getWrapped(userId, { year })` (issue 13; docs/rules.md, "Wrapped"): a user's year in review in the hosted
 * service's `WrappedResponse` shape, computed from the user's ledger of that year (bounded reads: one range
 * read per metric, points system and the streak, plus one row before the year for the totals at its start),
 * the rank history of the board runs of the year, and the yearly indexes of core/wrapped.ts for the
 * percentiles among users (three counts per metric and points system, never a scan of users).
 */
import type { CompiledLeaderboard, LaurelConfig } from '../config/define.js';
import { listedFor, userAchievementView } from '../core/achievements.js';
import { addDays, localDateOf, periodEndOf, periodStartOf, nextPeriodStart, startOfLocalDate, type Frequency, type LocalDate } from '../core/calendar.js';
import { addExact } from '../core/decimal.js';
import { boardIndex, groupOf, leaderboardView, runContaining, runStatus, type BoardStatus, type Run } from '../core/leaderboards.js';
import { own, userZone } from '../core/step.js';
import type { Award, Effects, LeaderboardView, MetricRowData, StreakPeriodRow, UserAchievement, UserRecord, UserState } from '../core/types.js';
import { validateUserId } from '../core/users.js';
import { yearlyIndex } from '../core/wrapped.js';
import { ValidationError } from '../errors.js';
import type { Store } from '../store/types.js';
import { ledgerTotals, type DatedTotal } from './summaries.js';

/** A metric's figures for one attribute value of its events in a period (`WrappedMetric.byAttribute`). */
export interface WrappedAttributeValue {
  name: string;
  /** Laurel metrics have no units: always null. */
  units: null;
  /** The year's total of the metric's events carrying this value (Laurel keeps no lifetime total per value). */
  currentTotal: number;
  changeThisPeriod: number;
  percentChange: number;
}

/** A user's metric in a period (wire shape `WrappedMetric`). */
export interface WrappedMetric {
  name: string;
  /** Laurel metrics have no units: always null. */
  units: null;
  /** The user's total now. */
  currentTotal: number;
  changeThisPeriod: number;
  percentChange: number;
  /** Only for the entire year (see docs/rules.md, "Wrapped"). */
  percentileThisPeriod?: number;
  /** Attribute key -> value -> figures, for the values the metric's events carried in the period. */
  byAttribute: Record<string, Record<string, WrappedAttributeValue>>;
}

/** A user's points system in a period (wire shape `WrappedPoints`). */
export interface WrappedPoints {
  name: string;
  description: string | null;
  /** The user's total now (time grants due by now included). */
  currentTotal: number;
  changeThisPeriod: number;
  percentChange: number;
  /** Only for the entire year (see docs/rules.md, "Wrapped"). */
  percentileThisPeriod?: number;
}

/** The user's best rank on a board in a period, in the run it was reached in (wire shape `UserLeaderboardResponse`). */
export interface WrappedLeaderboard extends LeaderboardView {
  status: BoardStatus;
  /** Deprecated wire field: the first breakdown attribute, or null. */
  breakdownAttribute: string | null;
  rank: number;
  value: number | null;
}

/** What the user did in one period (wire shape `WrappedActivityPeriod`). */
export interface WrappedActivityPeriod {
  metrics: Record<string, WrappedMetric>;
  points: Record<string, WrappedPoints>;
  /** Achievements completed in the period, in completion order. */
  achievements: UserAchievement[];
  /** Per board where the user had a rank in the period: the best one. */
  leaderboards: Record<string, WrappedLeaderboard>;
}

/** The user's longest streak of the year (wire shape `WrappedStreak`). */
export interface WrappedStreak {
  length: number;
  frequency: Frequency;
  periodStart: LocalDate | null;
  periodEnd: LocalDate | null;
  started: LocalDate | null;
}

/** The year's activity (wire shape `WrappedActivity`). */
export interface WrappedActivity {
  daysActive: number;
  weeksActive: number;
  monthsActive: number;
  mostActiveDay: WrappedActivityPeriod & { date: LocalDate };
  mostActiveWeek: WrappedActivityPeriod & { start: LocalDate; end: LocalDate };
  /** `month`: 0 (January) to 11. */
  mostActiveMonth: WrappedActivityPeriod & { month: number };
  entireYear: WrappedActivityPeriod & { longestStreak: WrappedStreak };
}

/** `getWrapped`'s answer (wire shape `WrappedResponse`; the wire adds the user's notification fields). */
export interface WrappedResponse {
  user: UserRecord & { control: boolean };
  activity: WrappedActivity;
}

/** What `getWrapped` needs from the engine. */
export interface WrappedContext {
  config: LaurelConfig;
  /** The engine's guarded store. */
  store: Store;
  now: () => Date;
  /** The user's state brought up to now (as every read: nothing committed). @throws NotFoundError */
  load: (userId: string) => Promise<{ state: UserState; awards: Map<string, Award[]>; effects: Effects }>;
  /** The engine's view of a user record (as `getUser` answers it). */
  view: (state: UserState) => UserRecord & { control: boolean };
}

/** Laurel's supported years (docs/rules.md section 1). */
const MIN_YEAR = 1900;
const MAX_YEAR = 8999;

/** Rank-history reads in flight at once. */
const READS_IN_FLIGHT = 16;

const yearError = (value: unknown, max: number) =>
  new ValidationError(`year must be an integer from ${MIN_YEAR} to ${max} (got ${String(value)})`, [{ path: ['year'], message: `must be an integer from ${MIN_YEAR} to ${max}` }]);

const round2 = (n: number) => Math.round(n * 100) / 100;

/** Percent change from `start`: relative to |start|; from 0, 100 for a rise, -100 for a fall, 0 for none. */
export function percentChange(change: number, start: number): number {
  if (start === 0) return change > 0 ? 100 : change < 0 ? -100 : 0;
  return round2((change / Math.abs(start)) * 100);
}

/** The next double above `x` (so that `value < nextUp(x)` reads `value <= x` in a store's range count). */
export function nextUp(x: number): number {
  if (Number.isNaN(x) || x === Infinity) return x;
  if (x === 0) return Number.MIN_VALUE;
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat64(0, x);
  const bits = buf.getBigUint64(0);
  buf.setBigUint64(0, x > 0 ? bits + 1n : bits - 1n);
  return buf.getFloat64(0);
}

const date4 = (year: number, rest: string) => `${String(year).padStart(4, '0')}-${rest}`;
const maxDate = (a: LocalDate, b: LocalDate) => (a > b ? a : b);
const minDate = (a: LocalDate, b: LocalDate) => (a < b ? a : b);

/** Runs `tasks` with at most `n` in flight; results in order. */
async function limited<T>(tasks: (() => Promise<T>)[], n: number): Promise<T[]> {
  const out: T[] = new Array<T>(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await (tasks[i] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker));
  return out;
}

/** A period of the year: local dates (inclusive, clipped to the year) and the instants that bound it. */
interface Period {
  first: LocalDate;
  last: LocalDate;
  from: string;
  to: string;
}

/** A metric row of the year with its local date. */
interface MetricRow {
  date: LocalDate;
  delta: number;
  total: number;
  attributes: Record<string, string> | undefined;
  /** False for a reversal row written by replay (not an event). */
  event: boolean;
}

/**
 * The user's year in review. Reads: per metric, its rows of the year and the last row before; per points
 * system, its rows of the year (from three days before, for runs of time grants reaching into it) and the
 * last row before those; the streak rows of the year's periods; per board, the rank history of each run of
 * the year; per metric and points system, three reads of the year's index for the percentile.
 * @throws {ValidationError} a year that is not an integer from 1900 to the current year (in the user's zone).
 * @throws {NotFoundError} an unknown user.
 */
export async function getWrapped(ctx: WrappedContext, userId: string, opts: { year?: number } = {}): Promise<WrappedResponse> {
  const { config, store } = ctx;
  opts = opts ?? {};
  const asked = opts.year;
  if (asked !== undefined && (typeof asked !== 'number' || !Number.isInteger(asked) || asked < MIN_YEAR || asked > MAX_YEAR)) throw yearError(asked, MAX_YEAR);
  validateUserId(userId, ['userId']);
  const now = ctx.now();
  const { state, awards, effects } = await ctx.load(userId);
  const tz = userZone(config, state);
  const today = localDateOf(now, tz);
  const thisYear = Number(today.slice(0, 4));
  const year = asked ?? thisYear;
  if (year > thisYear) throw yearError(asked, thisYear);

  const yearFirst = date4(year, '01-01');
  const yearLast = date4(year, '12-31');
  const from = startOfLocalDate(yearFirst, tz).toISOString();
  const to = startOfLocalDate(date4(year + 1, '01-01'), tz).toISOString();
  const period = (first: LocalDate, last: LocalDate): Period => {
    const f = maxDate(first, yearFirst);
    const l = minDate(last, yearLast);
    return { first: f, last: l, from: startOfLocalDate(f, tz).toISOString(), to: l === yearLast ? to : startOfLocalDate(addDays(l, 1), tz).toISOString() };
  };

  // Metrics: the year's rows and the total before it.
  const metricRows = await Promise.all(
    config.metrics.map(async (m) => {
      const [before] = await store.readLedger({ userId, kind: 'metric', key: m.key, to: from, order: 'desc', limit: 1 });
      const rows = await store.readLedger({ userId, kind: 'metric', key: m.key, from, to, order: 'asc' });
      return {
        baseline: before?.total ?? 0,
        rows: rows.map((r): MetricRow => {
          const data = r.data as MetricRowData | null;
          return { date: localDateOf(Date.parse(r.at), tz), delta: r.delta, total: r.total, attributes: data?.attributes, event: data?.reverses === undefined };
        }),
      };
    }),
  );

  // Activity: per day, the sum of the positive values of the events recorded in it, across metrics.
  const byDay = new Map<LocalDate, number>();
  for (const { rows } of metricRows) for (const r of rows) if (r.event && r.delta > 0) byDay.set(r.date, addExact(byDay.get(r.date) ?? 0, r.delta));
  const byWeek = new Map<LocalDate, number>();
  const byMonth = new Map<number, number>();
  for (const [day, sum] of byDay) {
    const week = periodStartOf(day, 'weekly', config.weekStartsOn);
    byWeek.set(week, addExact(byWeek.get(week) ?? 0, sum));
    const month = Number(day.slice(5, 7)) - 1;
    byMonth.set(month, addExact(byMonth.get(month) ?? 0, sum));
  }
  const most = <K extends string | number>(m: Map<K, number>, fallback: K): K => {
    let best = fallback;
    let top = 0;
    for (const k of [...m.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      const v = m.get(k) as number;
      if (v > top) {
        top = v;
        best = k;
      }
    }
    return best;
  };
  const day = most(byDay, yearFirst);
  const week = most(byWeek, periodStartOf(yearFirst, 'weekly', config.weekStartsOn));
  const month = most(byMonth, 0);
  const monthFirst = date4(year, `${String(month + 1).padStart(2, '0')}-01`);
  const periods = {
    day: period(day, day),
    week: period(week, addDays(week, 6)),
    month: period(monthFirst, periodEndOf(monthFirst, 'monthly')),
    year: period(yearFirst, yearLast),
  };

  // Points: dated running totals (runs of time grants spread over the bounds asked), grants due by now included.
  const bounds = [...new Set(Object.values(periods).flatMap((p) => [p.from, p.to]))];
  const lookBack = new Date(Date.parse(from) - 3 * 86_400_000).toISOString();
  const pointsTotals = await Promise.all(
    config.pointsSystems.map(async (system) => {
      const pending = (awards.get(system.key) ?? []).filter((a) => a.date < to).map((a): DatedTotal => ({ at: a.date, total: a.total, delta: a.awarded, grants: a.grants }));
      return ledgerTotals(store, { userId, kind: 'points', key: system.key, from: lookBack, to }, pending, bounds);
    }),
  );
  const totalAt = (points: readonly { at: string; total: number }[], at: string) => {
    let total = 0;
    for (const p of points) {
      if (p.at >= at) break;
      total = p.total;
    }
    return total;
  };

  // Percentiles among users, for the entire year: the share of the users in the year's index (the user
  // counted once, in or not) whose change is at or below the user's; none when no one else is in it.
  const percentile = async (index: string, change: number): Promise<number | undefined> => {
    const [mine, all, atOrBelow] = await Promise.all([store.getEntry(index, userId), store.countEntries(index), store.countEntries(index, { max: nextUp(change) })]);
    const others = all - (mine ? 1 : 0);
    if (others <= 0) return undefined;
    const othersBelow = atOrBelow - (mine && mine.value <= change ? 1 : 0);
    return round2(((othersBelow + 1) / (others + 1)) * 100);
  };

  const metricPart = (i: number, p: Period): WrappedMetric => {
    const m = config.metrics[i] as LaurelConfig['metrics'][number];
    const { baseline, rows } = metricRows[i] as (typeof metricRows)[number];
    let start = baseline;
    let change = 0;
    const attrChange = new Map<string, Map<string, number>>();
    const attrStart = new Map<string, Map<string, number>>();
    const attrYear = new Map<string, Map<string, number>>();
    const add = (into: Map<string, Map<string, number>>, k: string, v: string, delta: number) => {
      let values = into.get(k);
      if (!values) into.set(k, (values = new Map()));
      values.set(v, addExact(values.get(v) ?? 0, delta));
    };
    for (const r of rows) {
      const inside = r.date >= p.first && r.date <= p.last;
      if (r.date < p.first) start = r.total;
      else if (inside) change = addExact(change, r.delta);
      if (!r.attributes) continue;
      for (const k of Object.keys(r.attributes)) {
        const v = r.attributes[k] as string;
        add(attrYear, k, v, r.delta);
        if (r.date < p.first) add(attrStart, k, v, r.delta);
        else if (inside) add(attrChange, k, v, r.delta);
      }
    }
    const byAttribute: WrappedMetric['byAttribute'] = {};
    for (const [k, values] of attrChange) {
      const out: Record<string, WrappedAttributeValue> = {};
      for (const [v, c] of values) {
        out[v] = { name: m.name, units: null, currentTotal: attrYear.get(k)?.get(v) ?? 0, changeThisPeriod: c, percentChange: percentChange(c, attrStart.get(k)?.get(v) ?? 0) };
      }
      byAttribute[k] = out;
    }
    return { name: m.name, units: null, currentTotal: Number(own(state.metrics, m.key) ?? 0), changeThisPeriod: change, percentChange: percentChange(change, start), byAttribute };
  };

  const pointsPart = (i: number, p: Period): WrappedPoints => {
    const system = config.pointsSystems[i] as LaurelConfig['pointsSystems'][number];
    const points = pointsTotals[i] as { at: string; total: number }[];
    const start = totalAt(points, p.from);
    const change = addExact(totalAt(points, p.to), -start);
    return { name: system.name, description: system.description, currentTotal: own(state.points, system.key)?.total ?? 0, changeThisPeriod: change, percentChange: percentChange(change, start) };
  };

  // Achievements completed in the year, in completion order.
  const done = config.achievements
    .filter((a) => listedFor(a, state))
    .map((a) => ({ a, at: own(state.achievements, a.key)?.achievedAt }))
    .filter((x): x is { a: (typeof x)['a']; at: string } => x.at !== undefined && x.at >= from && x.at < to)
    .sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : 0))
    .map((x) => ({ at: x.at, view: userAchievementView(x.a, state) }));

  // Boards: the user's ranks of the year from the rank history of each run of the year.
  const ranks = await boardRanks(ctx, state, userId, yearFirst, yearLast, now);

  const part = (p: Period): WrappedActivityPeriod => {
    const metrics: Record<string, WrappedMetric> = {};
    config.metrics.forEach((m, i) => {
      metrics[m.key] = metricPart(i, p);
    });
    const points: Record<string, WrappedPoints> = {};
    config.pointsSystems.forEach((s, i) => {
      points[s.key] = pointsPart(i, p);
    });
    const leaderboards: Record<string, WrappedLeaderboard> = {};
    for (const { board, rows } of ranks) {
      let best: (typeof rows)[number] | null = null;
      for (const r of rows) if (r.date >= p.first && r.date <= p.last && (best === null || r.rank < best.rank || (r.rank === best.rank && r.date < best.date))) best = r;
      if (!best) continue;
      leaderboards[board.key] = {
        ...leaderboardView(board),
        status: runStatus(board, best.run, now),
        breakdownAttribute: board.breakdownAttributes[0] ?? null,
        start: best.run.start,
        end: best.run.end,
        rank: best.rank,
        value: best.value,
      };
    }
    return { metrics, points, achievements: done.filter((d) => d.at >= p.from && d.at < p.to).map((d) => d.view), leaderboards };
  };

  const entireYear = part(periods.year);
  await Promise.all([
    ...config.metrics.map(async (m) => {
      const entry = entireYear.metrics[m.key] as WrappedMetric;
      const p = await percentile(yearlyIndex('metric', m.key, year), entry.changeThisPeriod);
      if (p !== undefined) entry.percentileThisPeriod = p;
    }),
    ...config.pointsSystems.map(async (s) => {
      const entry = entireYear.points[s.key] as WrappedPoints;
      const p = await percentile(yearlyIndex('points', s.key, year), entry.changeThisPeriod);
      if (p !== undefined) entry.percentileThisPeriod = p;
    }),
  ]);

  return {
    user: ctx.view(state),
    activity: {
      daysActive: byDay.size,
      weeksActive: byWeek.size,
      monthsActive: byMonth.size,
      mostActiveDay: { date: day, ...part(periods.day) },
      mostActiveWeek: { start: week, end: addDays(week, 6), ...part(periods.week) },
      mostActiveMonth: { month, ...part(periods.month) },
      entireYear: { ...entireYear, longestStreak: await longestStreak(ctx, userId, tz, year, effects) },
    },
  };
}

/**
 * The user's ranks on each board in the year: per run of the year (in the board's zone, or the user's when
 * it follows each user's), the rank-history rows dated in the year with a rank within `maxParticipants`.
 * The user's current breakdown group is read.
 */
async function boardRanks(ctx: WrappedContext, state: UserState, userId: string, yearFirst: LocalDate, yearLast: LocalDate, now: Date) {
  const { config, store } = ctx;
  const reads: { board: CompiledLeaderboard; run: Run; index: string; limit: number }[] = [];
  for (const b of config.leaderboards) {
    if (b.status === 'inactive') continue;
    const boardToday = localDateOf(now, b.timeZone ?? userZone(config, state));
    const first = maxDate(yearFirst, b.start);
    const last = minDate(minDate(yearLast, b.end ?? yearLast), boardToday);
    if (first > last) continue;
    const group = groupOf(b, state.user.attributes);
    for (let run = runContaining(b, first); run.start <= last; ) {
      // History rows are read newest first, one per date: those after the year come first.
      const newest = minDate(run.end ?? boardToday, boardToday);
      const oldest = maxDate(run.start, yearFirst);
      const limit = Math.floor((Date.parse(newest) - Date.parse(oldest)) / 86_400_000) + 3;
      if (limit > 0) reads.push({ board: b, run, index: boardIndex(b.key, run.start, group), limit });
      if (run.end === null) break;
      // After the board's last run comes that run again (a board that does not repeat has one run, and a
      // repeating board's end may cut its last run short): stop there.
      const next = runContaining(b, addDays(run.end, 1));
      if (next.start <= run.start) break;
      run = next;
    }
  }
  const histories = await limited(
    reads.map((r) => () => store.readRankHistory(r.index, userId, r.limit)),
    READS_IN_FLIGHT,
  );
  const out = new Map<string, { board: CompiledLeaderboard; rows: { date: LocalDate; rank: number; value: number | null; run: Run }[] }>();
  reads.forEach((r, i) => {
    let entry = out.get(r.board.key);
    if (!entry) out.set(r.board.key, (entry = { board: r.board, rows: [] }));
    for (const h of histories[i] ?? []) {
      if (h.date < yearFirst || h.date > yearLast || h.rank === null || h.rank > r.board.maxParticipants) continue;
      entry.rows.push({ date: h.date, rank: h.rank, value: h.value, run: r.run });
    }
  });
  return [...out.values()];
}

/**
 * The longest run of the year's streak periods (periods starting in the year) that kept the streak: its
 * length counts the periods of the run that extended the streak (freezes and pauses keep it without adding,
 * as in the streak itself); `started` is the local date of the run's first extension.
 */
async function longestStreak(ctx: WrappedContext, userId: string, tz: string, year: number, effects: Effects): Promise<WrappedStreak> {
  const { config, store } = ctx;
  const sc = config.streak;
  if (!sc) return { length: 0, frequency: 'daily', periodStart: null, periodEnd: null, started: null };
  const freq = sc.frequency;
  const yearFirst = date4(year, '01-01');
  const yearLast = date4(year, '12-31');
  let firstPeriod = periodStartOf(yearFirst, freq, config.weekStartsOn);
  if (firstPeriod < yearFirst) firstPeriod = nextPeriodStart(firstPeriod, freq);
  const lastPeriod = periodStartOf(yearLast, freq, config.weekStartsOn);
  // Rows are dated in the period (an extension) or at the start of the day after it (a freeze, a pause); two
  // days of slack either side for a zone change.
  const from = startOfLocalDate(addDays(firstPeriod, -2), tz).toISOString();
  const to = startOfLocalDate(addDays(periodEndOf(lastPeriod, freq), 4), tz).toISOString();
  const stored = await store.readLedger({ userId, kind: 'streak', key: 'streak', from, to, order: 'asc' });
  const byPeriod = new Map<LocalDate, { row: StreakPeriodRow; at: string }>();
  for (const r of [...stored, ...effects.ledger.filter((e) => e.kind === 'streak' && e.at >= from && e.at < to)]) {
    const row = r.data as StreakPeriodRow;
    if (row.rule !== undefined && row.rule !== config.rules.streak) continue;
    if (row.periodStart < firstPeriod || row.periodStart > lastPeriod || row.length <= 0) continue;
    byPeriod.set(row.periodStart, { row, at: r.at });
  }
  const runs: WrappedStreak[] = [];
  let run: WrappedStreak | null = null;
  let previous: LocalDate | null = null;
  for (const p of [...byPeriod.keys()].sort()) {
    const { row, at } = byPeriod.get(p) as { row: StreakPeriodRow; at: string };
    if (run === null || previous === null || nextPeriodStart(previous, freq) !== p) runs.push((run = { length: 0, frequency: freq, periodStart: p, periodEnd: row.periodEnd, started: null }));
    run.periodEnd = row.periodEnd;
    if (!row.usedFreeze && row.usedPause !== true) {
      run.length += 1;
      run.started ??= localDateOf(Date.parse(at), tz);
    }
    previous = p;
  }
  // The longest; of equally long ones, the earliest.
  let best: WrappedStreak = { length: 0, frequency: freq, periodStart: null, periodEnd: null, started: null };
  for (const r of runs) if (r.length > best.length) best = r;
  return best;
}
