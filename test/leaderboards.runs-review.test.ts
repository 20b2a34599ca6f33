/**
 * Board runs found by a leaderboard fuzz against a brute-force model (docs/rules.md, section 7):
 * - a points board that ended: time grants of a user idle across its end that fell due in its last run count
 *   there (they were dropped: the board had no current run, so its earlier runs were not looked at either);
 * - `getUserLeaderboard` of a past run reads the user's entry in the group they had in that run (it read
 *   their group now, and answered no rank and no value after an attribute change).
 */
import { expect, it } from 'vitest';
import { boardIndex, createEngine, defineConfig } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { freshStore, onEachStore } from './stores.js';

onEachStore('board runs (review of a leaderboard fuzz)', (kind) => {
  it("a points board's last run gets the grants that fell due in it when the next call comes after the end", async () => {
    const common = { rankBy: 'points' as const, pointsSystemKey: 'xp', start: '2026-03-01', runUnit: 'day' as const, runInterval: 1, timeZone: 'UTC' };
    const config = defineConfig({
      timeZone: 'UTC',
      metrics: [{ key: 'm', name: 'M' }],
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 10 }, { key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }] }],
      leaderboards: [{ key: 'ends', name: 'Ends', ...common, end: '2026-03-10' }, { key: 'open', name: 'Open', ...common }],
    });
    let now = new Date('2026-03-10T20:00:00Z');
    const store = await freshStore(kind);
    const engine = createEngine({ config, store, clock: () => now, newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = new Date('2026-03-12T02:30:00Z'); // grants at 21:00-23:00 of 03-10 fell due in the last run
    await engine.recordEvent('m', { user: { id: 'u' }, value: 0 });
    for (const key of ['ends', 'open'] as const) expect((await engine.getLeaderboard(key, { run: '2026-03-10' })).rankings.map((r) => r.value), key).toEqual([13]);
    // No run after the end gets anything (there is none: a read of a later date reads the last run).
    expect(await store.readRange(boardIndex('ends', '2026-03-11', ''), 0, 10)).toEqual([]);
    expect((await engine.getLeaderboard('open', { run: '2026-03-11' })).rankings.map((r) => r.value)).toEqual([24]);
  });

  it('getUserLeaderboard of a past run reads the group the user had in that run', async () => {
    const config = defineConfig({
      timeZone: 'UTC',
      metrics: [{ key: 'm', name: 'M' }],
      attributes: [{ key: 'team', name: 'Team', type: 'user' }],
      leaderboards: [{ key: 'daily', name: 'Daily', rankBy: 'metric', metricKey: 'm', start: '2026-03-01', runUnit: 'day', runInterval: 1, breakdownAttributes: ['team'] }],
    });
    let now = new Date('2026-03-10T12:00:00Z');
    const engine = createEngine({ config, store: await freshStore(kind), clock: () => now, newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u', attributes: { team: 'red' } }, value: 3 });
    now = new Date('2026-03-12T12:00:00Z');
    await engine.updateUser('u', { attributes: { team: 'blue' } });
    const mine = await engine.getUserLeaderboard('u', 'daily', { run: '2026-03-10' });
    expect([mine.rank, mine.value, mine.history.map((h) => h.value)]).toEqual([1, 3, [3]]);
    // The current run: the group now (blue), where the user has no entry yet.
    expect((await engine.getUserLeaderboard('u', 'daily')).value).toBeNull();
  });
});
