/**
 * Calendar maths: instants to local dates in an IANA zone, civil-date arithmetic, and the local periods
 * (days, weeks, months) that streaks, summaries, time grants and leaderboard runs are built on.
 *
 * Dates are `YYYY-MM-DD` strings. Civil arithmetic runs on day numbers (days since 1970-01-01 in the
 * proleptic Gregorian calendar) so that it never depends on the process's own time zone or on DST.
 */
import { fromZonedTime } from 'date-fns-tz';

/** A `YYYY-MM-DD` calendar date. */
export type LocalDate = string;
export type Frequency = 'daily' | 'weekly' | 'monthly';
export type WeekStart = 0 | 1 | 2 | 3 | 4 | 5 | 6;

const MS_PER_DAY = 86_400_000;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;

// Intl formatters are costly to build and cheap to reuse; one per zone, built on first use.
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hourCycle: 'h23',
    });
    formatters.set(tz, f);
  }
  return f;
}

const zoneValidity = new Map<string, boolean>();

/** True when `tz` is an IANA zone name this runtime knows (e.g. `Europe/Paris`, `UTC`). */
export function isValidTimeZone(tz: string): boolean {
  let ok = zoneValidity.get(tz);
  if (ok === undefined) {
    try {
      formatterFor(tz);
      ok = tz.length > 0;
    } catch {
      ok = false;
    }
    if (zoneValidity.size < 10_000) zoneValidity.set(tz, ok);
  }
  return ok;
}

const BUCKET_MS = 15 * 60_000;
const dayCache = new Map<string, LocalDate>();

/**
 * The local calendar date of an instant in a zone.
 *
 * Formatting through Intl is the costly part of the per-event path, so dates are cached per zone and
 * 15-minute bucket. A bucket is cached only when its first and last millisecond have the same local date;
 * since local dates never decrease with time, every instant in it then has that date (a bucket that a
 * midnight cuts, as with historic offsets that are not whole quarter hours, is never cached).
 */
export function localDateOf(instant: Date | number, tz: string): LocalDate {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  const bucket = Math.floor(ms / BUCKET_MS);
  const key = `${tz}|${bucket}`;
  const hit = dayCache.get(key);
  if (hit !== undefined) return hit;
  const date = formatLocalDate(ms, tz);
  if (formatLocalDate(bucket * BUCKET_MS, tz) === date && formatLocalDate(bucket * BUCKET_MS + BUCKET_MS - 1, tz) === date) {
    if (dayCache.size >= 50_000) dayCache.clear();
    dayCache.set(key, date);
  }
  return date;
}

function formatLocalDate(instant: number, tz: string): LocalDate {
  const parts = formatterFor(tz).formatToParts(instant);
  let y = '';
  let m = '';
  let d = '';
  for (const p of parts) {
    if (p.type === 'year') y = p.value;
    else if (p.type === 'month') m = p.value;
    else if (p.type === 'day') d = p.value;
  }
  return `${y.padStart(4, '0')}-${m}-${d}`;
}

/** The instant of local midnight at the start of `date` in `tz` (on a DST gap at midnight: the first valid instant). */
export function startOfLocalDate(date: LocalDate, tz: string): Date {
  return fromZonedTime(`${date}T00:00:00`, tz);
}

/** True for a real `YYYY-MM-DD` date (2024-02-30 is not). */
export function isValidLocalDate(value: string): boolean {
  const m = DATE_RE.exec(value);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= daysInMonth(y, mo);
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Days since 1970-01-01 of a civil date. */
export function dayNumber(date: LocalDate): number {
  const y = Number(date.slice(0, 4));
  const m = Number(date.slice(5, 7));
  const d = Number(date.slice(8, 10));
  return Math.floor(Date.UTC(y, m - 1, d) / MS_PER_DAY);
}

/** The civil date of a day number. */
export function dateOfDayNumber(n: number): LocalDate {
  const d = new Date(n * MS_PER_DAY);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth() + 1;
  const day = d.getUTCDate();
  return `${y < 1000 ? String(y).padStart(4, '0') : y}-${m < 10 ? '0' : ''}${m}-${day < 10 ? '0' : ''}${day}`;
}

/** `date` plus `days` (negative allowed). */
export function addDays(date: LocalDate, days: number): LocalDate {
  return dateOfDayNumber(dayNumber(date) + days);
}

/** `date` plus `months`, clamped to the last day of the target month (Jan 31 + 1 month = Feb 28/29). */
export function addMonths(date: LocalDate, months: number): LocalDate {
  const y = Number(date.slice(0, 4));
  const m = Number(date.slice(5, 7)) - 1 + months;
  const d = Number(date.slice(8, 10));
  const ty = y + Math.floor(m / 12);
  const tm = ((m % 12) + 12) % 12;
  const day = Math.min(d, daysInMonth(ty, tm + 1));
  return `${String(ty).padStart(4, '0')}-${String(tm + 1).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/** Whole days from `a` to `b` (positive when `b` is later). */
export function daysBetween(a: LocalDate, b: LocalDate): number {
  return dayNumber(b) - dayNumber(a);
}

/** Day of week, 0 = Sunday. */
export function dayOfWeek(date: LocalDate): number {
  return (((dayNumber(date) + 4) % 7) + 7) % 7; // 1970-01-01 was a Thursday
}

/** First date of the period (day, week starting on `weekStartsOn`, or month) that contains `date`. */
export function periodStartOf(date: LocalDate, frequency: Frequency, weekStartsOn: WeekStart = 1): LocalDate {
  if (frequency === 'daily') return date;
  if (frequency === 'weekly') return addDays(date, -((dayOfWeek(date) - weekStartsOn + 7) % 7));
  return `${date.slice(0, 8)}01`;
}

/** First date of the period after the one starting at `start`. */
export function nextPeriodStart(start: LocalDate, frequency: Frequency): LocalDate {
  if (frequency === 'daily') return addDays(start, 1);
  if (frequency === 'weekly') return addDays(start, 7);
  return addMonths(start, 1);
}

/** First date of the period before the one starting at `start`. */
export function previousPeriodStart(start: LocalDate, frequency: Frequency): LocalDate {
  if (frequency === 'daily') return addDays(start, -1);
  if (frequency === 'weekly') return addDays(start, -7);
  return addMonths(start, -1);
}

/** Last date (inclusive) of the period starting at `start`. */
export function periodEndOf(start: LocalDate, frequency: Frequency): LocalDate {
  return addDays(nextPeriodStart(start, frequency), -1);
}

/** Number of whole periods from the period starting at `a` to the one starting at `b` (both period starts). */
export function periodsBetween(a: LocalDate, b: LocalDate, frequency: Frequency): number {
  if (frequency === 'daily') return daysBetween(a, b);
  if (frequency === 'weekly') return Math.round(daysBetween(a, b) / 7);
  const ya = Number(a.slice(0, 4));
  const ma = Number(a.slice(5, 7));
  const yb = Number(b.slice(0, 4));
  const mb = Number(b.slice(5, 7));
  return (yb - ya) * 12 + (mb - ma);
}

/** Shifts a period start by `n` periods. */
export function shiftPeriod(start: LocalDate, n: number, frequency: Frequency): LocalDate {
  if (frequency === 'daily') return addDays(start, n);
  if (frequency === 'weekly') return addDays(start, 7 * n);
  return addMonths(start, n);
}

/** ISO 8601 UTC form of an instant. */
export function isoInstant(instant: Date | number): string {
  return new Date(instant).toISOString();
}
