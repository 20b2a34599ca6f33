/**
 * Restoring a streak pays its streak triggers (docs/rules.md, section 12: "Streak achievements, triggers and
 * boards follow the restored length in the same call"). They paid nothing: a trigger paid only when the call
 * extended the streak. A restored streak is now paid what one streak that had never been lost would have
 * been paid by its length, less what the lost streak and the streak begun since were paid as they grew.
 * Found by a streak fuzz against a day-by-day model.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const DAY = 86_400_000;
const config = (every: number) =>
  defineConfig({
    timeZone: 'UTC',
    metrics: [{ key: 'a', name: 'A' }],
    streak: { frequency: 'daily' },
    pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 's', type: 'streak', streakLengthThreshold: every, points: 100 }] }],
  });

/** A streak of `lost` days, a day missed, a streak of `since` days, then a restore: the xp paid in all. */
async function run(every: number, lost: number, since: number) {
  let now = Date.parse('2026-03-02T10:00:00Z');
  const engine = createEngine({ config: config(every), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  for (let d = 0; d < lost; d++, now += DAY) await engine.recordEvent('a', { user: { id: 'u' }, value: 1 });
  now += DAY; // missed: the streak is lost
  for (let d = 0; d < since; d++, now += DAY) await engine.recordEvent('a', { user: { id: 'u' }, value: 1 });
  // Restored on the last active day (or, with no streak since, the day after the missed one).
  if (since > 0) now -= DAY;
  const out = await engine.restoreStreak('u');
  expect(out.restored).toBe(true);
  expect(out.streak.length).toBe(lost + since);
  return (await engine.getPointsSummary('u', 'xp')).total;
}

it('pays the multiples one unbroken streak would have reached, less what the two streaks were paid', async () => {
  // 3 lost + 2 since = 5: the multiple 5 was reached by neither: paid now.
  expect(await run(5, 3, 2)).toBe(100);
  // 7 + 2 = 9: 5 was paid to the lost streak; nothing more.
  expect(await run(5, 7, 2)).toBe(100);
  // 4 + 6 = 10: 5 was paid to the streak since; 10 now.
  expect(await run(5, 4, 6)).toBe(200);
  // Every day pays: 3 + 2 days were paid as they came, as an unbroken streak of 5 would have been.
  expect(await run(1, 3, 2)).toBe(500);
  // Nothing begun since: the lost streak's own payments stand.
  expect(await run(3, 4, 0)).toBe(100);
});

it('property: after a restore, the streak trigger paid in all what an unbroken streak of that length is paid', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 7 }), fc.integer({ min: 0, max: 7 }), async (every, lost, since) => {
      expect(await run(every, lost, since)).toBe(100 * Math.floor((lost + since) / every));
    }),
    { numRuns: 40 },
  );
});
