/**
 * A run of daily time grants whose first grant fell due on a date the zone skipped (Pacific/Apia skipped
 * 2011-12-30): that grant and the next (12-31) both fall due where 12-31 starts (docs/rules.md, section 1).
 * The run's grants were placed one date late (its first date read from the first grant's instant, 12-31), so
 * summaries and points boards lost a grant from 12-31 and added one to January. The run now keeps the first
 * grant's date when its instant reads as another (`GrantRun.date`). Found by a time-zone fuzz.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

it('daily grants from a skipped date: each counts in the period it fell due', async () => {
  const config = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [{ key: 'tg', name: 'TG', triggers: [{ key: 'daily', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 }] }],
    leaderboards: [{ key: 'lb', name: 'LB', rankBy: 'points', pointsSystemKey: 'tg', start: '2011-12-01', runUnit: 'month', runInterval: 1, timeZone: 'Pacific/Apia' }],
  });
  let now = Date.parse('2011-12-29T18:00:00Z'); // 2011-12-29 08:00 in Apia (UTC-10)
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  await engine.recordEvent('m', { user: { id: 'u', tz: 'Pacific/Apia' }, value: 1 });
  now = Date.parse('2012-01-02T12:00:00Z'); // 2012-01-03 02:00 in Apia (UTC+14)
  const accrued = await engine.accrue('u');
  expect(accrued.points.tg?.awards.map((a) => [a.date, a.awarded, a.grants])).toEqual([['2011-12-30T10:00:00.000Z', 5, { count: 5, unit: 'day', every: 1, tz: 'Pacific/Apia', date: '2011-12-30' }]]);
  const daily = await engine.getPointsEventSummary('u', 'tg', { aggregation: 'daily', startDate: '2011-12-29', endDate: '2012-01-03' });
  expect(daily.map((r) => [r.date, r.change])).toEqual([
    ['2011-12-29', 0],
    ['2011-12-30', 0],
    ['2011-12-31', 2],
    ['2012-01-01', 1],
    ['2012-01-02', 1],
    ['2012-01-03', 1],
  ]);
  const monthly = await engine.getPointsEventSummary('u', 'tg', { aggregation: 'monthly', startDate: '2011-12-01', endDate: '2012-01-31' });
  expect(monthly.map((r) => [r.date, r.change])).toEqual([
    ['2011-12-01', 2],
    ['2012-01-01', 3],
  ]);
  expect((await engine.getLeaderboard('lb', { run: '2012-01-15' })).rankings.map((x) => x.value)).toEqual([3]);
  // A run whose first date is not skipped carries no date.
  now = Date.parse('2012-01-05T12:00:00Z');
  const later = await engine.accrue('u');
  expect(later.points.tg?.awards[0]?.grants).toEqual({ count: 3, unit: 'day', every: 1, tz: 'Pacific/Apia' });
});
