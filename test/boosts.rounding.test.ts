/**
 * A boosted award rounds the exact product of its points and multipliers (docs/rules.md, section 6: stacked
 * boosts multiply, then the product is rounded once). It rounded the product of doubles: 50 x 1.15 is 57.5,
 * paid 57 with `nearest` (the doubles give 57.49999999999999), and products of more than about 9 digits fell
 * outside a 1e-9 allowance with `down` and `up`. Found by a fuzz of points against a naive model.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { multiplyRounded } from '../src/core/decimal.js';
import { createMemoryStore } from '../src/memory.js';

const config = (points: number, multiplier: number, rounding: 'down' | 'up' | 'nearest') =>
  defineConfig({
    timeZone: 'UTC',
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [
      {
        key: 'xp',
        name: 'XP',
        triggers: [{ key: 't', type: 'metric', metricKey: 'm', metricThreshold: 1, points }],
        boosts: [{ key: 'b', name: 'B', multiplier, rounding, start: '2026-01-01', end: null }],
      },
    ],
  });

it.each([
  [50, 1.15, 'nearest', 58],
  [27_000_260, 1.15, 'down', 31_050_299],
  [27_000_260, 1.1, 'up', 29_700_286],
  [7, 1.5, 'down', 10],
  [7, 1.5, 'up', 11],
  [7, 1.5, 'nearest', 11],
  [3, 0.5, 'nearest', 2],
] as const)('%d points x %d, %s: %d', async (points, multiplier, rounding, paid) => {
  const engine = createEngine({ config: config(points, multiplier, rounding), store: createMemoryStore(), clock: () => new Date('2026-03-02T10:00:00Z') });
  expect((await engine.recordEvent('m', { user: { id: 'u' }, value: 1 })).points.xp?.total).toBe(paid);
});

it('property: the exact product of whole points and two-decimal multipliers, rounded in whole numbers', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100_000_000 }), fc.array(fc.integer({ min: 1, max: 9_999 }), { minLength: 1, maxLength: 3 }), fc.constantFrom('down', 'up', 'nearest'), (points, hundredths, rounding) => {
      const num = hundredths.reduce((a, h) => a * BigInt(h), BigInt(points));
      const den = 100n ** BigInt(hundredths.length);
      const floor = num / den;
      const rem = num % den;
      const expected = rounding === 'down' ? floor : rounding === 'up' ? floor + (rem > 0n ? 1n : 0n) : floor + (2n * rem >= den ? 1n : 0n);
      expect(multiplyRounded([points, ...hundredths.map((h) => h / 100)], rounding)).toBe(Number(expected));
    }),
    { numRuns: 500 },
  );
});
