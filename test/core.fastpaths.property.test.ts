/**
 * The pure core's fast paths against the plain computations they stand for: formatted instants
 * (`isoOf` vs `toISOString`), counts of hourly grants before an instant (a quotient vs the binary search over
 * the grants' instants), and the remembered day-number conversions (vs the uncached arithmetic).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dateOfDayNumber, dayNumber } from '../src/core/calendar.js';
import { grantInstant, grantsBefore } from '../src/core/points.js';
import { instantMs, isoOf } from '../src/core/instants.js';
import type { GrantRun } from '../src/core/types.js';

const HOUR_MS = 3_600_000;
/** Every instant a Date holds (years -271821 to 275760), and the edges of the four-digit years. */
const anyInstant = fc.oneof(
  fc.integer({ min: -8.64e15, max: 8.64e15 }),
  fc.integer({ min: -62_167_219_200_000 - 2 * 86_400_000, max: -62_167_219_200_000 + 2 * 86_400_000 }),
  fc.integer({ min: 253_402_300_799_999 - 2 * 86_400_000, max: 253_402_300_799_999 + 2 * 86_400_000 }),
  fc.integer({ min: Date.parse('2020-01-01T00:00:00Z'), max: Date.parse('2030-01-01T00:00:00Z') }),
  // Fractions, which a Date truncates toward zero.
  fc.double({ min: -1e12, max: 1e12, noNaN: true }),
);

/** The definition `grantsBefore` answers: how many of the run's grants fall due strictly before `bound`. */
function grantsBeforeBySearch(first: string, run: GrantRun, bound: number): number {
  let lo = 0;
  let hi = run.count;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (grantInstant(first, run, mid) < bound) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

describe('core fast paths', () => {
  it('isoOf formats every instant as toISOString does, and throws as it does for an invalid one', () => {
    fc.assert(
      fc.property(fc.array(anyInstant, { minLength: 1, maxLength: 20 }), (instants) => {
        for (const ms of instants) expect(isoOf(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 500 },
    );
    expect(() => isoOf(NaN)).toThrow(RangeError);
    expect(() => isoOf(8.64e15 + 1)).toThrow(RangeError);
  });

  it('instantMs parses as Date.parse does', () => {
    fc.assert(
      fc.property(anyInstant, fc.string(), (ms, junk) => {
        const iso = new Date(ms).toISOString();
        expect(instantMs(iso)).toBe(Date.parse(iso));
        expect(instantMs(iso)).toBe(Date.parse(iso));
        expect(Object.is(instantMs(junk), Date.parse(junk))).toBe(true);
      }),
    );
  });

  it('grantsBefore of an hourly run counts the grants before the bound exactly', () => {
    const run = fc.record({ count: fc.integer({ min: 0, max: 20_000 }), every: fc.integer({ min: 1, max: 48 }) });
    fc.assert(
      fc.property(fc.integer({ min: Date.parse('1990-01-01T00:00:00Z'), max: Date.parse('2090-01-01T00:00:00Z') }), run, fc.integer({ min: -3, max: 20_003 }), fc.integer({ min: -2, max: 2 }), (firstMs, r, k, off) => {
        const first = new Date(firstMs).toISOString();
        const grants: GrantRun = { count: r.count, unit: 'hour', every: r.every, tz: 'UTC' };
        // Bounds on a grant's instant, a millisecond either side of it, and anywhere in between.
        for (const bound of [firstMs + k * r.every * HOUR_MS + off, firstMs + k * r.every * HOUR_MS - 1800_000, NaN]) {
          expect(grantsBefore(first, grants, bound)).toBe(grantsBeforeBySearch(first, grants, bound));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('remembered day numbers agree with the arithmetic, for whole and fractional numbers alike', () => {
    const reference = (n: number) => new Date(Math.floor(n) * 86_400_000).toISOString().slice(0, 10);
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.integer({ min: -700_000, max: 2_500_000 }), fc.double({ min: -700_000, max: 2_500_000, noNaN: true })), { maxLength: 30 }), (days) => {
        // Twice over: the second pass reads what the first remembered (and fractions share slots with wholes).
        for (let pass = 0; pass < 2; pass++) {
          for (const n of days) {
            const date = dateOfDayNumber(n);
            if (Math.floor(n) >= -719_162 && Math.floor(n) <= 2_932_896) expect(date).toBe(reference(n));
            // (`==` rather than Object.is: day -0 is day 0.)
            expect(dayNumber(date) === Math.floor(n)).toBe(true);
          }
        }
      }),
    );
  });
});

describe('instantMs on texts of the canonical shape', () => {
  it('equals Date.parse for any instant written by toISOString and for near-miss texts', () => {
    const text = fc.oneof(
      fc.date({ min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString()),
      // Canonical shape, any digits: out-of-range months, days, hours; February 29th of common years.
      fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 19 }), fc.integer({ min: 0, max: 39 }), fc.integer({ min: 0, max: 29 }), fc.integer({ min: 0, max: 69 }))
        .map(([y, mo, d, h, mi]) => `${String(y).padStart(4, '0')}-${String(mo).padStart(2, '0')}-${String(d).padStart(2, '0')}T${String(h).padStart(2, '0')}:${String(mi).padStart(2, '0')}:59.999Z`),
      fc.string({ maxLength: 30 }),
      fc.constantFrom('2026-01-05T00:00:00Z', '2026-01-05', '2026-01-05T00:00:00.000+01:00', '+012026-01-05T00:00:00.000Z', '2026-01-05T00:00:00.00aZ'),
    );
    fc.assert(
      fc.property(text, (iso) => {
        expect(instantMs(iso)).toBe(Date.parse(iso));
      }),
      { numRuns: 5000 },
    );
  });
});
