/**
 * Points boards count each award, and each grant of a run of time grants, in the run it fell due in (docs/rules.md,
 * sections 6 and 7). Grants a call materialised for a user idle across a run's end fell due in the earlier
 * run, and were added to no run at all (the January run kept 10 where the monthly summary says 12). They now
 * count in that run when the user's state knows its value: a run still within reach, or the run of their
 * latest entry. Found by a fuzz of reads against a naive oracle.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';
import { onEachStore, setupOn } from './stores.js';

const config = (boost: boolean) =>
  defineConfig({
    timeZone: 'UTC',
    metrics: [{ key: 'm', name: 'M' }],
    pointsSystems: [
      {
        key: 'xp',
        name: 'XP',
        triggers: [
          { key: 'daily', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 },
          { key: 'per', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 },
        ],
        // A boost elsewhere in time: each grant is then an award of its own.
        ...(boost ? { boosts: [{ key: 'b', name: 'B', multiplier: 2, start: '2027-03-01', end: '2027-03-02' }] } : {}),
      },
    ],
    leaderboards: [{ key: 'monthly', name: 'Monthly', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01', runUnit: 'month', runInterval: 1 }],
  });

onEachStore('grants of an idle user on a points board', (kind) => {
  it.each([
    ['UTC', false],
    ['UTC', true],
    ['Pacific/Auckland', true],
  ] as const)('%s (one award per grant: %s): each run of a monthly points board holds what the monthly summary says', async (tz, boost) => {
    const t = await setupOn(kind, config(boost), '2026-01-29T12:00:00Z');
    const e = t.engine;
    await e.recordEvent('m', { user: { id: 'u', tz }, value: 1 });
    for (const at of ['2026-02-02T12:00:00Z', '2026-05-03T12:00:00Z']) {
      t.set(at);
      await e.recordEvent('m', { user: { id: 'u' }, value: 1 });
    }
    const summary = await e.getPointsEventSummary('u', 'xp', { aggregation: 'monthly', startDate: '2026-01-01', endDate: '2026-05-31' });
    const board = async (run: string) => (await e.getLeaderboard('monthly', { run })).rankings[0]?.value ?? 0;
    // January; February, the latest entry when May came; April, within reach of May; May.
    expect(await board('2026-01-15')).toBe(summary[0]?.change);
    expect(await board('2026-02-15')).toBe(summary[1]?.change);
    expect(await board('2026-04-15')).toBe(summary[3]?.change);
    expect(await board('2026-05-15')).toBe(summary[4]?.change);
    // March (never an entry, out of reach from May) is left as it was: a call's cost does not grow with idle time.
    expect(summary[2]?.change).toBeGreaterThan(0);
    expect(await board('2026-03-15')).toBe(0);
  });
});

it('points a configuration change backdates leave finished runs as they are (only time grants count in an earlier run)', async () => {
  const cfg = (ach: boolean) =>
    defineConfig({
      timeZone: 'UTC',
      metrics: [{ key: 'm', name: 'M' }],
      achievements: ach ? [{ key: 'one', name: 'One', trigger: 'metric', metricKey: 'm', metricValue: 1 }] : [],
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 }, ...(ach ? [{ key: 'a', type: 'achievement' as const, achievementKey: 'one', points: 50 }] : [])] }],
      leaderboards: [{ key: 'monthly', name: 'Monthly', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01', runUnit: 'month', runInterval: 1 }],
    });
  const store = createMemoryStore();
  const ids = sequentialIds();
  let now = Date.parse('2026-01-20T12:00:00Z');
  await createEngine({ config: cfg(false), store, clock: () => new Date(now), newId: ids }).recordEvent('m', { user: { id: 'u' }, value: 1 });
  now = Date.parse('2026-02-10T12:00:00Z');
  const e = createEngine({ config: cfg(true), store, clock: () => new Date(now), newId: ids });
  await e.recordEvent('m', { user: { id: 'u' }, value: 1 });
  expect((await e.getLeaderboard('monthly', { run: '2026-01-15' })).rankings[0]?.value).toBe(10);
});
