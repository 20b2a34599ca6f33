import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addDays,
  addMonths,
  dateOfDayNumber,
  dayNumber,
  dayOfWeek,
  daysBetween,
  isValidLocalDate,
  localDateOf,
  MAX_INSTANT_MS,
  MAX_LOCAL_DATE,
  MIN_INSTANT_MS,
  MIN_LOCAL_DATE,
  periodsBetween,
  periodStartOf,
  shiftPeriod,
  startOfLocalDate,
  type WeekStart,
} from '../src/core/calendar.js';

const DAY = 86_400_000;

// Reference civil arithmetic through Date, avoiding Date.UTC (which reads years 0..99 as 1900..1999).
function refDayNumber(y: number, m: number, d: number): number {
  const dt = new Date(0);
  dt.setUTCFullYear(y, m - 1, d);
  return Math.round(dt.getTime() / DAY);
}
function refParts(n: number): [number, number, number] {
  const dt = new Date(n * DAY);
  return [dt.getUTCFullYear(), dt.getUTCMonth() + 1, dt.getUTCDate()];
}
const pad = (v: number, w: number) => String(v).padStart(w, '0');
const refFormat = ([y, m, d]: [number, number, number]) => `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}`;
const refDaysInMonth = (y: number, m: number) => refDayNumber(y, m + 1, 1) - refDayNumber(y, m, 1);

const FIRST_YEAR_0 = refDayNumber(0, 1, 1);
const FIRST = refDayNumber(1900, 1, 1);
const LAST = refDayNumber(9999, 12, 31);

/** Day numbers of the supported range, with its edges and the turn of centuries well represented. */
const arbDayNumber = (min: number, max: number) =>
  fc.oneof(
    fc.integer({ min, max }),
    fc.integer({ min, max: Math.min(max, min + 800) }),
    fc.integer({ min: Math.max(min, max - 800), max }),
    fc.integer({ min: 0, max: 99 }).chain((c) => fc.integer({ min: -400, max: 400 }).map((k) => Math.min(max, Math.max(min, refDayNumber(c * 100, 3, 1) + k)))),
  );
const arbDate = (min = FIRST, max = LAST) => arbDayNumber(min, max).map((n) => refFormat(refParts(n)));

describe('civil arithmetic is exact across the supported range (and 0000..9999)', () => {
  it('dayNumber and dateOfDayNumber agree with the Date reference and invert each other', () => {
    fc.assert(
      fc.property(arbDayNumber(FIRST_YEAR_0, LAST), (n) => {
        const date = refFormat(refParts(n));
        expect(dateOfDayNumber(n)).toBe(date);
        expect(dayNumber(date)).toBe(n);
      }),
      { numRuns: 5000 },
    );
  });

  it('addDays and daysBetween agree with the reference', () => {
    fc.assert(
      fc.property(arbDayNumber(FIRST, LAST), fc.integer({ min: -4_000_000, max: 4_000_000 }), (n, k) => {
        const target = Math.min(LAST, Math.max(FIRST, n + k));
        const date = refFormat(refParts(n));
        const result = addDays(date, target - n);
        expect(result).toBe(refFormat(refParts(target)));
        expect(daysBetween(date, result)).toBe(target - n);
        expect(isValidLocalDate(result)).toBe(result <= MAX_LOCAL_DATE);
      }),
      { numRuns: 5000 },
    );
  });

  it('addMonths clamps to the end of the month and agrees with the reference', () => {
    fc.assert(
      fc.property(arbDate(FIRST_YEAR_0), fc.integer({ min: -120_000, max: 120_000 }), (date, k) => {
        const [y, m, d] = [Number(date.slice(0, 4)), Number(date.slice(5, 7)), Number(date.slice(8, 10))];
        const total = y * 12 + (m - 1) + k;
        fc.pre(total >= 0 && total < 10_000 * 12);
        const ty = Math.floor(total / 12);
        const tm = (total % 12) + 1;
        const expected = `${pad(ty, 4)}-${pad(tm, 2)}-${pad(Math.min(d, refDaysInMonth(ty, tm)), 2)}`;
        expect(addMonths(date, k)).toBe(expected);
        expect(periodsBetween(periodStartOf(date, 'monthly'), periodStartOf(expected, 'monthly'), 'monthly')).toBe(k);
      }),
      { numRuns: 5000 },
    );
  });

  it('dayOfWeek agrees with Date#getUTCDay and weeks start on weekStartsOn', () => {
    fc.assert(
      fc.property(arbDayNumber(FIRST + 7, LAST), fc.integer({ min: 0, max: 6 }), (n, ws) => {
        const date = refFormat(refParts(n));
        expect(dayOfWeek(date)).toBe(new Date(n * DAY).getUTCDay());
        const start = periodStartOf(date, 'weekly', ws as WeekStart);
        expect(dayOfWeek(start)).toBe(ws);
        expect(daysBetween(start, date)).toBeGreaterThanOrEqual(0);
        expect(daysBetween(start, date)).toBeLessThan(7);
      }),
      { numRuns: 3000 },
    );
  });

  it('shiftPeriod and periodsBetween invert each other', () => {
    fc.assert(
      fc.property(arbDate(), fc.constantFrom('daily', 'weekly', 'monthly' as const), fc.integer({ min: -2000, max: 2000 }), (date, freq, k) => {
        const start = periodStartOf(date, freq);
        const shifted = shiftPeriod(start, k, freq);
        fc.pre(isValidLocalDate(shifted));
        expect(periodsBetween(start, shifted, freq)).toBe(k);
        expect(shiftPeriod(shifted, -k, freq)).toBe(start);
      }),
      { numRuns: 3000 },
    );
  });

  it('isValidLocalDate is exactly "a real date from 1900-01-01 to 8999-12-31"', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 13 }), fc.integer({ min: 0, max: 32 }), (y, m, d) => {
        const s = `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}`;
        const real = m >= 1 && m <= 12 && d >= 1 && d <= refDaysInMonth(y, m);
        expect(isValidLocalDate(s)).toBe(real && y >= 1900 && y <= 8999);
        expect(isValidLocalDate(s)).toBe(real && s >= MIN_LOCAL_DATE && s <= MAX_LOCAL_DATE);
      }),
      { numRuns: 5000 },
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), (s) => {
        const shaped = /^\d{4}-\d{2}-\d{2}$/.test(s);
        if (!shaped) expect(isValidLocalDate(s)).toBe(false);
      }),
    );
  });
});

describe('local dates of instants', () => {
  const zones = [...Intl.supportedValuesOf('timeZone'), 'UTC'];

  it('every supported instant lies in the day that startOfLocalDate gives for its local date', () => {
    fc.assert(
      fc.property(fc.integer({ min: MIN_INSTANT_MS, max: MAX_INSTANT_MS }), fc.constantFrom(...zones), (t, tz) => {
        const d = localDateOf(t, tz);
        expect(isValidLocalDate(d)).toBe(true);
        const s = startOfLocalDate(d, tz).getTime();
        expect(s).toBeLessThanOrEqual(t);
        expect(localDateOf(s, tz)).toBe(d);
        expect(localDateOf(s - 1, tz) < d).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});
