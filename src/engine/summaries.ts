/**
 * Chart data: per-period totals and changes of a metric or a points system over a date range, read from
 * the ledger by time range (cost follows the range, never the user's whole history).
 */
import { ValidationError } from '../errors.js';
import {
  daysBetween,
  isValidLocalDate,
  nextPeriodStart,
  periodStartOf,
  startOfLocalDate,
  type Frequency,
  type LocalDate,
  type WeekStart,
} from '../core/calendar.js';
import { addExact } from '../core/decimal.js';
import { grantInstant, grantsBefore } from '../core/points.js';
import type { AwardRow, GrantRun, LedgerRow } from '../core/types.js';
import type { Store } from '../store/types.js';

/** The period length of a summary's rows. */
export type Aggregation = 'daily' | 'weekly' | 'monthly';

/**
 * Options of `Engine.getMetricEventSummary` and `Engine.getPointsEventSummary`: the period length and the dates
 * (`YYYY-MM-DD`, at most 400 days apart) whose periods the summary covers.
 */
export interface SummaryOptions {
  /** The period length. */
  aggregation: Aggregation;
  /** The first date (`YYYY-MM-DD`): the summary starts with the period containing it. */
  startDate: string;
  /** The last date (`YYYY-MM-DD`), at most 400 days after `startDate`: the summary ends with the period containing it. */
  endDate: string;
}

/**
 * One period of a summary: the period's first date, the running total at its end, and how much the total
 * changed during it.
 */
export interface SummaryRow {
  /** The period's first date, in the user's zone. */
  date: LocalDate;
  /** The total at the end of the period. */
  total: number;
  /** The net change during the period. */
  change: number;
}

/** Validates summary options (docs/rules.md, section 6). */
export function validateSummaryOptions(options: SummaryOptions | undefined): SummaryOptions {
  const issues: { path: string[]; message: string }[] = [];
  const o = (options ?? {}) as Partial<SummaryOptions>;
  if (!o.aggregation || !['daily', 'weekly', 'monthly'].includes(o.aggregation)) issues.push({ path: ['aggregation'], message: 'must be daily, weekly or monthly' });
  if (typeof o.startDate !== 'string' || !isValidLocalDate(o.startDate)) issues.push({ path: ['startDate'], message: 'must be a date in YYYY-MM-DD form' });
  if (typeof o.endDate !== 'string' || !isValidLocalDate(o.endDate)) issues.push({ path: ['endDate'], message: 'must be a date in YYYY-MM-DD form' });
  if (issues.length === 0) {
    const span = daysBetween(o.startDate as string, o.endDate as string);
    if (span < 0) issues.push({ path: ['endDate'], message: 'must not be before startDate' });
    else if (span > 400) issues.push({ path: ['endDate'], message: `must be at most 400 days after startDate (got ${span})` });
  }
  if (issues.length > 0) throw new ValidationError(`Invalid summary options: ${issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`, issues);
  return o as SummaryOptions;
}

/** The periods of a summary and the instants that bound them. */
export function summaryPeriods(options: SummaryOptions, tz: string, weekStartsOn: WeekStart): { starts: LocalDate[]; bounds: string[] } {
  const freq: Frequency = options.aggregation;
  const starts: LocalDate[] = [];
  for (let p = periodStartOf(options.startDate, freq, weekStartsOn); p <= options.endDate; p = nextPeriodStart(p, freq)) starts.push(p);
  const bounds = starts.map((p) => startOfLocalDate(p, tz).toISOString());
  bounds.push(startOfLocalDate(nextPeriodStart(starts[starts.length - 1] as LocalDate, freq), tz).toISOString());
  return { starts, bounds };
}

/**
 * Folds dated running totals into per-period rows. `baseline` is the total before the first bound;
 * `points` are (instant, total-after) pairs in time order, all inside the bounds.
 */
export function foldSummary(starts: readonly LocalDate[], bounds: readonly string[], baseline: number, points: readonly { at: string; total: number }[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  let total = baseline;
  let i = 0;
  for (let p = 0; p < starts.length; p++) {
    const end = bounds[p + 1] as string;
    const opening = total;
    while (i < points.length && (points[i] as { at: string }).at < end) {
      total = (points[i] as { total: number }).total;
      i++;
    }
    rows.push({ date: starts[p] as LocalDate, total, change: addExact(total, -opening) });
  }
  return rows;
}

/** A dated running total; `grants` marks a run of time grants whose first grant is dated `at`. */
export interface DatedTotal {
  at: string;
  total: number;
  delta: number;
  grants?: GrantRun | undefined;
}

/**
 * A user's ledger of one kind and key as dated totals in time order (see {@link totalsInTimeOrder}): its rows
 * from `from` to `to` and the last one before `from`, with `pending` (awards a read materialised, not stored)
 * among them, summed from the total before that last row.
 */
export async function ledgerTotals(store: Pick<Store, 'readLedger'>, q: { userId: string; kind: 'metric' | 'points'; key: string; from: string; to: string }, pending: readonly DatedTotal[], bounds: readonly string[]): Promise<{ at: string; total: number }[]> {
  const [before] = await store.readLedger({ userId: q.userId, kind: q.kind, key: q.key, to: q.from, order: 'desc', limit: 1 });
  const rows = await store.readLedger({ userId: q.userId, kind: q.kind, key: q.key, from: q.from, to: q.to, order: 'asc' });
  // A row is a dated total as it is; only a run of grants needs its run spelled out.
  const dated = (r: LedgerRow): DatedTotal => {
    const grants = (r.data as AwardRow | null)?.grants;
    return grants ? { at: r.at, total: r.total, delta: r.delta, grants } : r;
  };
  return totalsInTimeOrder(before ? addExact(before.total, -before.delta) : 0, [...(before ? [dated(before)] : []), ...rows.map(dated), ...pending], bounds);
}

/**
 * Dated totals in time order, summed from `baseline` by the changes' instants: each row's change at its
 * instant, each run of time grants spread over the periods its grants fell in (at the last grant before
 * every bound, and its last grant). The totals rows store are running totals in commit order, which is time
 * order unless a clock stepped back or a zone change dated a run before rows already written; a period's
 * total is what the changes dated before its end add up to.
 */
export function totalsInTimeOrder(baseline: number, points: readonly DatedTotal[], bounds: readonly string[]): { at: string; total: number }[] {
  // The usual case, rows in time order and no run of grants to spread: running sums, each row itself where
  // its stored total agrees (nothing allocated for it).
  let ordered = true;
  for (let i = 0; i < points.length; i++) {
    const p = points[i] as DatedTotal;
    if ((p.grants !== undefined && p.grants.count > 1) || (i > 0 && (points[i - 1] as DatedTotal).at > p.at)) {
      ordered = false;
      break;
    }
  }
  if (ordered) {
    const out: { at: string; total: number }[] = new Array(points.length);
    let total = baseline;
    for (let i = 0; i < points.length; i++) {
      const p = points[i] as DatedTotal;
      total = addExact(total, p.delta);
      out[i] = p.total === total ? p : { at: p.at, total };
    }
    return out;
  }
  const changes: { at: string; delta: number }[] = [];
  for (const p of points) {
    const run = p.grants;
    if (!run || run.count <= 1) {
      changes.push({ at: p.at, delta: p.delta });
      continue;
    }
    const each = p.delta / run.count;
    const marks = new Set<number>([run.count - 1]);
    for (const b of bounds) {
      const j = Math.min(grantsBefore(p.at, run, Date.parse(b)), run.count) - 1;
      if (j >= 0) marks.add(j);
    }
    let prev = -1;
    for (const j of [...marks].sort((a, b) => a - b)) {
      changes.push({ at: new Date(grantInstant(p.at, run, j)).toISOString(), delta: j === run.count - 1 ? addExact(p.delta, -each * (prev + 1)) : each * (j - prev) });
      prev = j;
    }
  }
  // A stable sort: changes of one instant keep the order they were written in.
  changes.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  let total = baseline;
  return changes.map((c) => ({ at: c.at, total: (total = addExact(total, c.delta)) }));
}

