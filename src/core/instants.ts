/**
 * ISO instants both ways, fast: the core formats its `now` and award dates with {@link isoOf}, the memory
 * store its ledger rows' instants; {@link instantMs} reads them back (ledger rows, index entries, users'
 * creation instants). Each gives exactly what `toISOString` / `Date.parse` give.
 */
import { ValidationError } from '../errors.js';
import { daysInMonth } from './calendar.js';

// The last few formatted instants (ms -> ISO string), replaced in turn.
const ISO_SLOTS = 4;
const isoMs = new Float64Array(ISO_SLOTS).fill(NaN);
const isoText: string[] = new Array<string>(ISO_SLOTS).fill('');
let isoNext = 0;

/**
 * `new Date(ms).toISOString()`, remembered for the last few instants formatted (a call formats its `now` in
 * several places, and users' due instants often coincide). Throws as `toISOString` does for an invalid one.
 */
export function isoOf(ms: number): string {
  for (let i = 0; i < ISO_SLOTS; i++) if (isoMs[i] === ms) return isoText[i] as string;
  const iso = Number.isInteger(ms) && ms >= FIRST_FAST_MS && ms <= LAST_FAST_MS ? fastIso(ms) : new Date(ms).toISOString();
  isoMs[isoNext] = ms;
  isoText[isoNext] = iso;
  isoNext = (isoNext + 1) % ISO_SLOTS;
  return iso;
}

// Whole milliseconds of years 0000 to 9999 (toISOString's four-digit form; a Date truncates fractions toward
// zero, which the arithmetic below would not for negative ones): the date part is formatted once per UTC day and the time
// of day from its digits, several times cheaper than `toISOString` (and the Date it needs).
const FIRST_FAST_MS = -62_167_219_200_000;
const LAST_FAST_MS = 253_402_300_799_999;
const DAY_MS = 86_400_000;
let isoDayMs = NaN;
/** Character codes of the current day's `YYYY-MM-DDT`. */
const dayCodes = new Array<number>(11).fill(0);

/**
 * The instant's text, made flat in one step by `String.fromCharCode`: a template literal of nine pieces would
 * make a tree of eight concatenations (V8's cons strings), about 280 bytes allocated per instant (measured
 * per call), which every reader of the text (a comparison, a map's hash, `JSON.stringify`) first copies into
 * a flat string.
 */
function fastIso(ms: number): string {
  const day = Math.floor(ms / DAY_MS) * DAY_MS;
  if (day !== isoDayMs) {
    const prefix = new Date(day).toISOString();
    for (let i = 0; i < 11; i++) dayCodes[i] = prefix.charCodeAt(i);
    isoDayMs = day;
  }
  let t = ms - day;
  const h = Math.floor(t / 3_600_000);
  t -= h * 3_600_000;
  const m = Math.floor(t / 60_000);
  t -= m * 60_000;
  const s = Math.floor(t / 1000);
  const f = t - s * 1000;
  const d = dayCodes;
  return String.fromCharCode(
    d[0] as number, d[1] as number, d[2] as number, d[3] as number, d[4] as number, d[5] as number, d[6] as number, d[7] as number, d[8] as number, d[9] as number, d[10] as number,
    48 + Math.floor(h / 10), 48 + (h % 10), 58, 48 + Math.floor(m / 10), 48 + (m % 10), 58, 48 + Math.floor(s / 10), 48 + (s % 10), 46,
    48 + Math.floor(f / 100), 48 + (Math.floor(f / 10) % 10), 48 + (f % 10), 90,
  );
}

const CUM_DAYS = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Milliseconds since the epoch of an ISO instant (NaN for a text that is not one, as `Date.parse` gives).
 * `Date.prototype.toISOString()` output with a four-digit year (`YYYY-MM-DDTHH:mm:ss.sssZ`, which is what
 * Laurel stores) is decoded directly from its characters, several times faster; any other shape goes through
 * `Date.parse`. For that canonical shape, comparing the numbers is comparing the strings (the memory store's
 * leaderboard index relies on it).
 */
export function instantMs(iso: string): number {
  // The last instant read, remembered: a commit reads its one `now` (a single string, see isoOf) for its
  // ledger rows and for each leaderboard write.
  if (iso === lastMsIso) return lastMs;
  const ms = decodeInstant(iso);
  lastMsIso = iso;
  lastMs = ms;
  return ms;
}
let lastMsIso = '';
let lastMs = NaN;

function decodeInstant(iso: string): number {
  if (
    iso.length === 24 &&
    iso.charCodeAt(4) === 45 && // -
    iso.charCodeAt(7) === 45 &&
    iso.charCodeAt(10) === 84 && // T
    iso.charCodeAt(13) === 58 && // :
    iso.charCodeAt(16) === 58 &&
    iso.charCodeAt(19) === 46 && // .
    iso.charCodeAt(23) === 90 // Z
  ) {
    // (No helper closure here: this runs for every ledger row and twice per leaderboard write.)
    const y0 = iso.charCodeAt(0) - 48, y1 = iso.charCodeAt(1) - 48, y2 = iso.charCodeAt(2) - 48, y3 = iso.charCodeAt(3) - 48;
    const mo0 = iso.charCodeAt(5) - 48, mo1 = iso.charCodeAt(6) - 48, da0 = iso.charCodeAt(8) - 48, da1 = iso.charCodeAt(9) - 48;
    const h0 = iso.charCodeAt(11) - 48, h1 = iso.charCodeAt(12) - 48, mi0 = iso.charCodeAt(14) - 48, mi1 = iso.charCodeAt(15) - 48;
    const s0 = iso.charCodeAt(17) - 48, s1 = iso.charCodeAt(18) - 48;
    const ms0 = iso.charCodeAt(20) - 48, ms1 = iso.charCodeAt(21) - 48, ms2 = iso.charCodeAt(22) - 48;
    // Every character a digit (an unsigned view of a negative difference is huge).
    if (
      y0 >>> 0 <= 9 && y1 >>> 0 <= 9 && y2 >>> 0 <= 9 && y3 >>> 0 <= 9 && mo0 >>> 0 <= 9 && mo1 >>> 0 <= 9 &&
      da0 >>> 0 <= 9 && da1 >>> 0 <= 9 && h0 >>> 0 <= 9 && h1 >>> 0 <= 9 && mi0 >>> 0 <= 9 && mi1 >>> 0 <= 9 &&
      s0 >>> 0 <= 9 && s1 >>> 0 <= 9 && ms0 >>> 0 <= 9 && ms1 >>> 0 <= 9 && ms2 >>> 0 <= 9
    ) {
      const year = y0 * 1000 + y1 * 100 + y2 * 10 + y3;
      const month = mo0 * 10 + mo1;
      const day = da0 * 10 + da1;
      const hour = h0 * 10 + h1;
      const minute = mi0 * 10 + mi1;
      const second = s0 * 10 + s1;
      const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
      if (year >= 1 && month >= 1 && month <= 12 && day >= 1 && hour <= 23 && minute <= 59 && second <= 59 &&
        day <= (MONTH_DAYS[month - 1] as number) + (month === 2 && leap ? 1 : 0)) {
        // Days since 1970-01-01 of the first of January of `year`, then of the day itself.
        const y = year - 1;
        const days = 365 * (year - 1970) + (Math.floor(y / 4) - Math.floor(y / 100) + Math.floor(y / 400)) - 477 +
          (CUM_DAYS[month - 1] as number) + (month > 2 && leap ? 1 : 0) + day - 1;
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + ms0 * 100 + ms1 * 10 + ms2;
      }
    }
  }
  return Date.parse(iso);
}

/** An ISO 8601 date, or date and time with `Z` or an offset (a time without one would be read in the process's zone). */
const ISO_PARAM = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;
/** 0000-01-01T00:00:00.000Z and 10000-01-01T00:00:00.000Z: the instants `toISOString` writes with four-digit years. */
const FIRST_PARAM_MS = -62_167_219_200_000;
const PAST_PARAM_MS = 253_402_300_800_000;

/**
 * Milliseconds of an ISO instant handed to a store method (`from`, `to`, `now`, `before`), which the stores
 * compare as instants, not as text: a date (`2026-01-05`, UTC midnight) or a date and time with `Z` or an
 * offset, in the years 0000-9999 (what `toISOString` writes with four digits, so that PostgreSQL's text
 * comparison of the stored form agrees). Anything else is a `ValidationError`.
 */
export function instantParam(name: string, iso: unknown): number {
  const ms = typeof iso === 'string' && ISO_PARAM.test(iso) && calendarDate(iso) ? Date.parse(iso) : Number.NaN;
  if (!(ms >= FIRST_PARAM_MS && ms < PAST_PARAM_MS)) {
    throw new ValidationError(`${name} is not an ISO instant in the years 0000-9999: ${JSON.stringify(iso)}`, [{ path: [name], message: 'must be an ISO 8601 instant (a date, or a date and time with Z or an offset) in the years 0000-9999' }]);
  }
  return ms;
}

/** Whether the text's leading `YYYY-MM-DD` names a day of the calendar (`Date.parse` rolls 2026-02-30 over into March). */
function calendarDate(iso: string): boolean {
  const month = Number(iso.slice(5, 7));
  const day = Number(iso.slice(8, 10));
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(Number(iso.slice(0, 4)), month);
}
