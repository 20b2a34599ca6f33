/**
 * Calendar maths: instants to local dates in an IANA zone, civil-date arithmetic, and the local periods
 * (days, weeks, months) that streaks, summaries, time grants and leaderboard runs are built on.
 *
 * Dates are `YYYY-MM-DD` strings. Civil arithmetic runs on day numbers (days since 1970-01-01 in the
 * proleptic Gregorian calendar), computed with exact integer algorithms that never go through `Date`, so it
 * depends neither on the process's own time zone, nor on DST, nor on `Date.UTC`'s 0..99 => 1900..1999 rule.
 *
 * Supported range: local dates from MIN_LOCAL_DATE (1900-01-01) to MAX_LOCAL_DATE (8999-12-31), and instants
 * from MIN_INSTANT_MS to MAX_INSTANT_MS, inside which every zone's local date lies in the date range. The
 * arithmetic (dayNumber, dateOfDayNumber, addDays, addMonths, ...) is exact for every year; years outside
 * 0000..9999 are written in an extended form (`10000-01-01`, `-0001-12-31`) that `dayNumber` reads back, but
 * only 0000..9999 dates compare correctly as strings.
 *
 * Zones: every zone argument is reduced to its canonical name (see canonicalTimeZone), and every cache in
 * this module is keyed by canonical names or bounded, so no spelling of a zone can grow memory.
 */

/**
 * A `YYYY-MM-DD` calendar date.
 *
 * @inline
 */
export type LocalDate = string;
/**
 * The length of a streak's (or a summary's) periods: calendar days, weeks or months in the user's zone.
 *
 * @inline
 */
export type Frequency = 'daily' | 'weekly' | 'monthly';
/**
 * The first day of the week, as `Date.getDay()` numbers it: 0 Sunday, 1 Monday (the default), ... 6 Saturday.
 *
 * @inline
 */
export type WeekStart = 0 | 1 | 2 | 3 | 4 | 5 | 6;

const MS_PER_DAY = 86_400_000;
const MS_PER_HOUR = 3_600_000;
/** Below this instant (0001-01-02T00:00:00Z) some zone's local year may be 0 or less: format with the era. */
const ERA_SAFE_MS = -62_135_510_400_000;

/** First supported local date. */
export const MIN_LOCAL_DATE: LocalDate = '1900-01-01';
/**
 * Last supported local date. Dates are compared as `YYYY-MM-DD` strings throughout, which is exact only for
 * four-digit years; ending at 8999 leaves room for every period, summary bound and leaderboard run computed
 * from a supported date (runs are at most 1000 units long) to stay below 9999-12-31.
 */
export const MAX_LOCAL_DATE: LocalDate = '8999-12-31';
const MIN_YEAR = 1900;
const MAX_YEAR = 8999;
/** First supported instant, 1900-01-02T00:00:00.000Z: its local date is on or after MIN_LOCAL_DATE in every zone. */
export const MIN_INSTANT_MS = -2_208_902_400_000;
/** Last supported instant, 8999-12-30T00:00:00.000Z: its local date is on or before MAX_LOCAL_DATE in every zone. */
export const MAX_INSTANT_MS = 221_845_219_200_000;

/** True for a valid instant (a Date or epoch milliseconds) between MIN_INSTANT_MS and MAX_INSTANT_MS inclusive. */
export function isSupportedInstant(instant: Date | number): boolean {
  const ms = typeof instant === 'number' ? instant : instant instanceof Date ? instant.getTime() : NaN;
  return ms >= MIN_INSTANT_MS && ms <= MAX_INSTANT_MS; // false for NaN
}

// ---------------------------------------------------------------------------------------------------------
// Zone names

const MAX_ZONE_NAME_LENGTH = 100;
/** Hard cap on the permanent name table (it only ever holds names Intl accepts: a few hundred, lower-cased). */
const MAX_KNOWN_NAMES = 20_000;
const MAX_FALLBACK_ENTRIES = 10_000;

/** Canonical name by exact canonical spelling and by lower-cased spelling of every name known to resolve. */
let knownNames: Map<string, string> | undefined;
/** Bounded: lower-cased spellings Intl rejected (null), or resolutions that did not fit in knownNames. */
const fallbackNames = new Map<string, string | null>();

/**
 * Current IANA zone names (each a `Zone` of the tz database, 2025b) that ICU, and so Intl, lists under an
 * older name and resolves to it (`Asia/Kolkata` to `Asia/Calcutta`, `Europe/Kyiv` to `Europe/Kiev`). A user
 * who sends one keeps it: it is the zone's name in the tz database, and the one the caller chose.
 */
const CURRENT_ZONE_NAMES = [
  'Africa/Asmara', 'America/Argentina/Buenos_Aires', 'America/Argentina/Catamarca', 'America/Argentina/Cordoba',
  'America/Argentina/Jujuy', 'America/Argentina/Mendoza', 'America/Atikokan', 'America/Indiana/Indianapolis',
  'America/Kentucky/Louisville', 'America/Nuuk', 'Asia/Ho_Chi_Minh', 'Asia/Kathmandu', 'Asia/Kolkata', 'Asia/Yangon',
  'Atlantic/Faroe', 'Europe/Kyiv', 'Pacific/Chuuk', 'Pacific/Kanton', 'Pacific/Pohnpei',
];

function names(): Map<string, string> {
  if (knownNames === undefined) {
    const m = new Map<string, string>();
    const listed = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
    const current = CURRENT_ZONE_NAMES.filter((n) => {
      try {
        return new Intl.DateTimeFormat('en-US', { timeZone: n }).resolvedOptions().timeZone.length > 0;
      } catch {
        return false; // a runtime whose tz data predates the name
      }
    });
    for (const n of [...listed, ...current, 'UTC']) {
      m.set(n, n);
      m.set(n.toLowerCase(), n);
    }
    knownNames = m;
  }
  return knownNames;
}

/**
 * The canonical IANA name of a zone, matched case-insensitively (`europe/paris` -> `Europe/Paris`, `utc` ->
 * `UTC`), or null when it is not a zone this runtime knows (empty, longer than 100 characters, or rejected by
 * Intl). Names in `Intl.supportedValuesOf('timeZone')`, `UTC` and the tz database's current names that Intl
 * lists under an older one (`Asia/Kolkata`, `Europe/Kyiv`: see `CURRENT_ZONE_NAMES`) come back exactly as
 * spelled there; other names Intl accepts (aliases such as `US/Pacific`, `Etc/GMT+5`) come back as Intl
 * resolves them. The result
 * is stable: canonicalTimeZone(canonicalTimeZone(x)) === canonicalTimeZone(x).
 */
export function canonicalTimeZone(tz: string): string | null {
  if (typeof tz !== 'string') return null;
  const table = names();
  const exact = table.get(tz);
  if (exact !== undefined) return exact;
  if (tz.length === 0 || tz.length > MAX_ZONE_NAME_LENGTH) return null;
  const lower = tz.toLowerCase();
  const known = table.get(lower);
  if (known !== undefined) return known;
  const cached = fallbackNames.get(lower);
  if (cached !== undefined) return cached;
  let resolved: string | null = null;
  try {
    const r = new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
    if (typeof r === 'string' && r.length > 0) resolved = table.get(r) ?? table.get(r.toLowerCase()) ?? r;
  } catch {
    resolved = null;
  }
  if (resolved !== null && table.size + 2 <= MAX_KNOWN_NAMES) {
    // Intl accepts names case-insensitively from a finite list, so these entries are bounded by that list.
    table.set(lower, resolved);
    if (!table.has(resolved)) table.set(resolved, resolved);
  } else {
    if (fallbackNames.size >= MAX_FALLBACK_ENTRIES) fallbackNames.clear();
    fallbackNames.set(lower, resolved);
  }
  return resolved;
}

/** True when `tz` is an IANA zone name this runtime knows, in any letter case (e.g. `Europe/Paris`, `utc`). */
export function isValidTimeZone(tz: string): boolean {
  return canonicalTimeZone(tz) !== null;
}

// ---------------------------------------------------------------------------------------------------------
// Per-zone state, keyed by canonical name only

interface Zone {
  readonly name: string;
  /** year, month, day, hour, minute, second: local dates and UTC offsets. Built on first use. */
  dateTime: Intl.DateTimeFormat | undefined;
  /** The same with the era, for instants whose local year may be 0 or less. Built on first use. */
  dateTimeEra: Intl.DateTimeFormat | undefined;
  /** Local date by 15-minute bucket (see localDateOf). */
  readonly days: Map<number, LocalDate>;
  /** First instant (ms) by local date (see startOfLocalDate). */
  readonly starts: Map<LocalDate, number>;
}

const zones = new Map<string, Zone>();

function zoneFor(tz: string): Zone {
  const hit = zones.get(tz);
  if (hit !== undefined) return hit;
  const name = canonicalTimeZone(tz);
  if (name === null) throw new RangeError(`Invalid time zone specified: ${String(tz)}`);
  let zone = zones.get(name);
  if (zone === undefined) {
    zone = {
      name,
      dateTime: undefined,
      dateTimeEra: undefined,
      days: new Map(),
      starts: new Map(),
    };
    zones.set(name, zone);
  }
  return zone;
}

function dateTimeFormatter(zone: Zone, era: boolean): Intl.DateTimeFormat {
  const existing = era ? zone.dateTimeEra : zone.dateTime;
  if (existing !== undefined) return existing;
  const f = new Intl.DateTimeFormat('en-US', {
    timeZone: zone.name,
    ...(era ? { era: 'short' as const } : {}),
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  });
  if (era) zone.dateTimeEra = f;
  else zone.dateTime = f;
  return f;
}

/** Two ASCII digits at `i` as a number. */
function two(s: string, i: number): number {
  return (s.charCodeAt(i) - 48) * 10 + s.charCodeAt(i + 1) - 48;
}

/** Local wall-clock time of an instant, as milliseconds on the UTC time line (so wall - ms is the offset). */
function wallClockOf(ms: number, zone: Zone): number {
  const msInSecond = ms - Math.floor(ms / 1000) * 1000;
  if (ms >= ERA_SAFE_MS) {
    // en-US gives "MM/DD/YYYY, HH:MM:SS" for years 1000..9999; format() is 3x faster than formatToParts().
    const s = dateTimeFormatter(zone, false).format(ms);
    if (s.length === 20 && s.charCodeAt(2) === 47 && s.charCodeAt(5) === 47 && s.charCodeAt(10) === 44 && s.charCodeAt(14) === 58 && s.charCodeAt(17) === 58) {
      const y = two(s, 6) * 100 + two(s, 8);
      return daysFromCivil(y, two(s, 0), two(s, 3)) * MS_PER_DAY + two(s, 12) * MS_PER_HOUR + two(s, 15) * 60_000 + two(s, 18) * 1000 + msInSecond;
    }
  }
  let y = 0;
  let mo = 0;
  let d = 0;
  let h = 0;
  let mi = 0;
  let sec = 0;
  let bc = false;
  for (const p of dateTimeFormatter(zone, ms < ERA_SAFE_MS).formatToParts(ms)) {
    switch (p.type) {
      case 'year': y = Number(p.value); break;
      case 'month': mo = Number(p.value); break;
      case 'day': d = Number(p.value); break;
      case 'hour': h = Number(p.value); break;
      case 'minute': mi = Number(p.value); break;
      case 'second': sec = Number(p.value); break;
      case 'era': bc = p.value === 'BC'; break;
      default: break;
    }
  }
  if (bc) y = 1 - y;
  return daysFromCivil(y, mo, d) * MS_PER_DAY + h * MS_PER_HOUR + mi * 60_000 + sec * 1000 + msInSecond;
}

/** UTC offset (ms) in force at an instant. */
function offsetAt(ms: number, zone: Zone): number {
  return wallClockOf(ms, zone) - ms;
}

// ---------------------------------------------------------------------------------------------------------
// Instants to local dates

const BUCKET_MS = 15 * 60_000;
/** The ends of the Date time line. */
const MAX_TIME_MS = 8.64e15;
const MAX_DAY_ENTRIES = 50_000;
let dayEntries = 0;

/**
 * The local calendar date of an instant in a zone (any spelling of a known zone; RangeError otherwise, and for
 * an invalid instant). Years outside 0000..9999 come back in the extended form (see dateOfDayNumber).
 *
 * Formatting through Intl is the costly part of the per-event path, so dates are cached per zone and
 * 15-minute bucket. A bucket is cached only when its first and last millisecond have the same UTC offset
 * and the same local date: under one offset local dates only rise with time, so every instant in it then has
 * that date (a bucket that a midnight or an offset change cuts is never cached). The cache is bounded.
 */
export function localDateOf(instant: Date | number, tz: string): LocalDate {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  const zone = zoneFor(tz);
  const bucket = Math.floor(ms / BUCKET_MS);
  const hit = zone.days.get(bucket);
  if (hit !== undefined) return hit;
  const first = bucket * BUCKET_MS;
  const last = first + BUCKET_MS - 1;
  if (first >= -MAX_TIME_MS && last <= MAX_TIME_MS) {
    const wFirst = wallClockOf(first, zone);
    const wLast = wallClockOf(last, zone);
    const day = Math.floor(wFirst / MS_PER_DAY);
    if (wFirst - first === wLast - last && Math.floor(wLast / MS_PER_DAY) === day) {
      const date = dateOfDayNumber(day);
      if (dayEntries >= MAX_DAY_ENTRIES) {
        for (const z of zones.values()) z.days.clear();
        dayEntries = 0;
      }
      zone.days.set(bucket, date);
      dayEntries += 1;
      return date;
    }
  }
  return dateOfDayNumber(Math.floor(wallClockOf(ms, zone) / MS_PER_DAY));
}

/**
 * The local wall-clock time of day of an instant in a zone, in milliseconds since local midnight
 * (0 ..< 86 400 000): what a clock on the wall reads, so on DST days 03:00 may come 2 or 4 hours after the
 * day began. RangeError for an unknown zone.
 */
export function localTimeOfDay(instant: Date | number, tz: string): number {
  const ms = typeof instant === 'number' ? instant : instant.getTime();
  const wall = wallClockOf(ms, zoneFor(tz));
  return wall - Math.floor(wall / MS_PER_DAY) * MS_PER_DAY;
}

// ---------------------------------------------------------------------------------------------------------
// Local dates to instants

/** UTC offsets stay well inside this bound (the widest real ones are -12 h and +14 h). */
const OFFSET_BOUND_MS = 18 * MS_PER_HOUR;
const MAX_START_ENTRIES = 20_000;
let startEntries = 0;

/**
 * The instant a local date starts in `tz`: the FIRST instant whose local date is `date`. Usually local
 * midnight; on a DST gap at midnight (America/Santiago, Atlantic/Azores, Africa/Cairo, ...) the first valid
 * instant after it (01:00 local); when midnight repeats (a fall-back across it) its first occurrence. For a
 * date the zone skipped entirely (Pacific/Apia 2011-12-30) it is the start of the next date that exists, so
 * in every case it is the first instant whose local date is on or after `date`. Returns an Invalid Date for a
 * malformed `date`; RangeError for an unknown zone.
 */
export function startOfLocalDate(date: LocalDate, tz: string): Date {
  const zone = zoneFor(tz);
  const hit = zone.starts.get(date);
  if (hit !== undefined) return new Date(hit);
  const n = dayNumber(date);
  if (!Number.isFinite(n)) return new Date(NaN);
  const ms = firstInstantOfDay(n, zone);
  if (startEntries >= MAX_START_ENTRIES) {
    for (const z of zones.values()) z.starts.clear();
    startEntries = 0;
  }
  zone.starts.set(date, ms);
  startEntries += 1;
  return new Date(ms);
}

/** The first instant whose local date (day number) is `n` or later. */
function firstInstantOfDay(n: number, zone: Zone): number {
  const midnight = n * MS_PER_DAY; // local midnight on the UTC time line
  // Every instant whose wall clock can read `midnight` lies in [lo, hi]; `lo` is still on an earlier date.
  const lo = midnight - OFFSET_BOUND_MS;
  const hi = midnight + OFFSET_BOUND_MS;
  const oLo = offsetAt(lo, zone);
  // Fast path: one offset over the whole window, so the day starts where that offset reads midnight.
  if (offsetAt(hi, zone) === oLo) {
    const t = midnight - oLo;
    if (offsetAt(t, zone) === oLo && offsetAt(t - 1, zone) === oLo) return t;
  }
  // Offsets change near this day: split the window into constant-offset segments and take the first instant
  // of the first segment that reaches the date, either where its offset reads midnight or at its start (a gap).
  const segments = offsetSegments(lo, hi, oLo, zone);
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment;
    const end = i + 1 < segments.length ? (segments[i + 1] as Segment).start : hi + 1;
    if (seg.start + seg.offset >= midnight) return seg.start;
    const t = midnight - seg.offset;
    if (t < end) return t;
  }
  return hi + 1; // unreachable while offsets stay inside OFFSET_BOUND_MS
}

interface Segment {
  start: number;
  offset: number;
}

/** The constant-offset stretches of [lo, hi], found by binary search (to the millisecond) on offset changes. */
function offsetSegments(lo: number, hi: number, oLo: number, zone: Zone): Segment[] {
  const segments: Segment[] = [{ start: lo, offset: oLo }];
  let from = lo;
  let oFrom = oLo;
  // Each round finds one change; a window of 36 hours never holds more than a handful.
  for (let round = 0; round < 8; round++) {
    const oHi = offsetAt(hi, zone);
    let a = from;
    let b = hi;
    if (oHi === oFrom) {
      // Same offset at both ends: look for an excursion at the midpoints of the halves before giving up.
      const probe = [from + (hi - from) / 4, from + (hi - from) / 2, from + (3 * (hi - from)) / 4].map(Math.floor).find((p) => offsetAt(p, zone) !== oFrom);
      if (probe === undefined) break;
      b = probe;
    }
    while (b - a > 1) {
      const mid = Math.floor((a + b) / 2);
      if (offsetAt(mid, zone) === oFrom) a = mid;
      else b = mid;
    }
    oFrom = offsetAt(b, zone);
    from = b;
    segments.push({ start: b, offset: oFrom });
  }
  return segments;
}

// ---------------------------------------------------------------------------------------------------------
// Civil dates

/** True for a real `YYYY-MM-DD` date between MIN_LOCAL_DATE and MAX_LOCAL_DATE (2024-02-30 and 0050-03-01 are not). */
export function isValidLocalDate(value: string): boolean {
  if (typeof value !== 'string' || value.length !== 10 || value.charCodeAt(4) !== 45 || value.charCodeAt(7) !== 45) return false;
  for (const i of DIGIT_POSITIONS) {
    const c = value.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  const y = Number(value.slice(0, 4));
  const m = Number(value.slice(5, 7));
  const d = Number(value.slice(8, 10));
  return y >= MIN_YEAR && y <= MAX_YEAR && m >= 1 && m <= 12 && d >= 1 && d <= daysInMonth(y, m);
}

const DIGIT_POSITIONS = [0, 1, 2, 3, 5, 6, 8, 9];
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeapYear(y: number): boolean {
  return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
}

/** Days in a month (1-12) of the proleptic Gregorian calendar. */
export function daysInMonth(year: number, month: number): number {
  return month === 2 ? (isLeapYear(year) ? 29 : 28) : (MONTH_DAYS[month - 1] as number);
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil; exact for any year). */
function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400; // [0, 399]
  const doy = Math.floor((153 * (m > 2 ? m - 3 : m + 9) + 2) / 5) + d - 1; // [0, 365]
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy; // [0, 146096]
  return era * 146_097 + doe - 719_468;
}

/** Year, month and day of a date string; the year is everything before the last `-MM-DD`. */
function yearOf(date: LocalDate): number {
  return Number(date.slice(0, date.length - 6));
}
function monthOf(date: LocalDate): number {
  return Number(date.slice(date.length - 5, date.length - 3));
}
function dayOf(date: LocalDate): number {
  return Number(date.slice(date.length - 2));
}

function formatDate(y: number, m: number, d: number): LocalDate {
  const ys = y >= 1000 ? String(y) : y >= 0 ? String(y).padStart(4, '0') : `-${String(-y).padStart(4, '0')}`;
  return `${ys}-${m < 10 ? '0' : ''}${m}-${d < 10 ? '0' : ''}${d}`;
}

// Calls do date arithmetic on the same few dates over and over (today, the streak's periods, board runs), so
// both directions of the day-number conversion are remembered: date -> number in a bounded map, number ->
// date in a direct-mapped table (a slot per `n mod DATE_SLOTS`, replaced when another number lands on it).
const MAX_DAY_NUMBERS = 20_000;
const dayNumbers = new Map<string, number>();
const DATE_SLOTS = 4096;
const slotDay = new Float64Array(DATE_SLOTS).fill(NaN);
const slotDate: string[] = new Array<string>(DATE_SLOTS).fill('');

/** Days since 1970-01-01 of a civil date (exact for every year; NaN for a malformed date). */
export function dayNumber(date: LocalDate): number {
  let n = dayNumbers.get(date);
  if (n === undefined) {
    n = daysFromCivil(yearOf(date), monthOf(date), dayOf(date));
    if (dayNumbers.size >= MAX_DAY_NUMBERS) dayNumbers.clear();
    dayNumbers.set(date, n);
  }
  return n;
}

/** The civil date of a day number (H. Hinnant's civil_from_days; exact for every integer; RangeError if not finite). */
export function dateOfDayNumber(n: number): LocalDate {
  if (!Number.isFinite(n)) throw new RangeError(`Invalid day number: ${n}`);
  const slot = n & (DATE_SLOTS - 1);
  if (slotDay[slot] === n) return slotDate[slot] as LocalDate;
  const date = civilFromDays(n);
  // Only whole numbers are remembered (a fraction shares its slot with the whole day but formats as its floor).
  if (Number.isInteger(n)) {
    slotDay[slot] = n;
    slotDate[slot] = date;
  }
  return date;
}

function civilFromDays(n: number): LocalDate {
  const z = Math.floor(n) + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097; // [0, 146096]
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365); // [0, 399]
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100)); // [0, 365]
  const mp = Math.floor((5 * doy + 2) / 153); // [0, 11], March-based
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return formatDate(yoe + era * 400 + (m <= 2 ? 1 : 0), m, d);
}

/** `date` plus `days` (negative allowed). */
export function addDays(date: LocalDate, days: number): LocalDate {
  return dateOfDayNumber(dayNumber(date) + days);
}

/** `date` plus `months`, clamped to the last day of the target month (Jan 31 + 1 month = Feb 28/29). */
export function addMonths(date: LocalDate, months: number): LocalDate {
  if (!Number.isInteger(months)) throw new RangeError(`Invalid month count: ${months}`);
  const m = monthOf(date) - 1 + months;
  const ty = yearOf(date) + Math.floor(m / 12);
  const tm = m - Math.floor(m / 12) * 12 + 1;
  if (!Number.isFinite(ty) || !Number.isFinite(tm)) throw new RangeError(`Invalid date: ${date}`);
  return formatDate(ty, tm, Math.min(dayOf(date), daysInMonth(ty, tm)));
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
  return `${date.slice(0, date.length - 2)}01`;
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
  return (yearOf(b) - yearOf(a)) * 12 + (monthOf(b) - monthOf(a));
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
