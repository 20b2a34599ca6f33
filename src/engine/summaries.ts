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
import { decimalOf, subtractDecimal } from '../core/decimal.js';

export type Aggregation = 'daily' | 'weekly' | 'monthly';

export interface SummaryOptions {
  aggregation: Aggregation;
  startDate: string;
  endDate: string;
}

export interface SummaryRow {
  date: LocalDate;
  total: number;
  change: number;
}

/** Validates summary options (semantics section 6). */
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
    rows.push({ date: starts[p] as LocalDate, total, change: Number(subtractDecimal(decimalOf(total), decimalOf(opening))) });
  }
  return rows;
}
