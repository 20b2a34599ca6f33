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
import type { GrantRun } from '../core/types.js';

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
 * Dated totals in time order, each run of time grants spread over the periods its grants fell in: for every
 * bound, the total after the run's last grant before it (so at most one point per period and run, whatever
 * the run's length), plus the run's last grant.
 */
export function spreadGrants(points: readonly DatedTotal[], bounds: readonly string[]): { at: string; total: number }[] {
  const out: { at: string; total: number }[] = [];
  let ordered = true;
  for (const p of points) {
    const run = p.grants;
    if (!run || run.count <= 1) {
      if (ordered && out.length > 0 && (out[out.length - 1] as { at: string }).at > p.at) ordered = false;
      out.push(p);
      continue;
    }
    ordered = false;
    const each = p.delta / run.count;
    const seen = new Set<number>();
    const emit = (j: number) => {
      if (j < 0 || seen.has(j)) return;
      seen.add(j);
      out.push({ at: new Date(grantInstant(p.at, run, j)).toISOString(), total: p.total - each * (run.count - 1 - j) });
    };
    for (const b of bounds) emit(grantsBefore(p.at, run, Date.parse(b)) - 1);
    emit(run.count - 1);
  }
  // Rows come in time order; only spread runs (and the rare row a zone change dated early) need a sort.
  return ordered ? out : out.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}
