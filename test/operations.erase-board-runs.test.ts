/**
 * `deleteUser` takes the user out of what board runs announced (docs/rules.md, section 13: nothing of the user
 * is kept, not even their id): the rankings of `leaderboard.started` / `.finished` / `.changed` events (change
 * events of no user) named the erased user, with their name, and were delivered after the erasure; the
 * sweep's `leaderboard.changed` mark kept their id. Found by a fuzz of erasure and tenants.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type OutboxStore } from '../src/index.js';
import { freshStore, onEachStore } from './stores.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-03-02', runUnit: 'day', runInterval: 7 }],
});

/** Every change event. */
async function allChanges(engine: ReturnType<typeof createEngine>) {
  return (await engine.readChanges({ limit: 1000 })).events;
}

onEachStore('deleteUser and board-run events', (kind) => {
  it('removes the erased user from the rankings and marks; the others stay as they were; a reset keeps its entry', async () => {
    const store = await freshStore(kind);
    let now = new Date('2026-03-03T10:00:00Z');
    const engine = createEngine({ config, store, clock: () => now });
    await engine.recordEvent('lessons', { user: { id: 'gone-user', name: 'Gone Name' }, value: 5 });
    await engine.recordEvent('lessons', { user: { id: 'stay', name: 'Stay' }, value: 3 });
    await engine.recordEvent('lessons', { user: { id: 'reset-user', name: 'Reset Name' }, value: 1 });
    await engine.sweep();
    const before = await allChanges(engine);
    expect(before.filter((e) => e.userId === null).map((e) => e.type).sort()).toEqual(['leaderboard.changed', 'leaderboard.started']);
    now = new Date('2026-03-03T11:00:00Z');
    await engine.resetUser('reset-user');
    await engine.deleteUser('gone-user');
    const after = await allChanges(engine);
    const runs = after.filter((e) => e.userId === null);
    expect(runs.map((e) => e.id)).toEqual(before.filter((e) => e.userId === null).map((e) => e.id));
    for (const e of runs) {
      const rankings = (e.payload as { leaderboard: { rankings: { userId: string; userName: string | null; rank: number; value: number }[] } }).leaderboard.rankings;
      // The others as announced, ranks included; the reset user still there (the id goes on).
      expect(rankings.map((r) => [r.userId, r.userName, r.rank, r.value])).toEqual([
        ['stay', 'Stay', 2, 3],
        ['reset-user', 'Reset Name', 3, 1],
      ]);
    }
    expect(JSON.stringify(after)).not.toMatch(/gone-user|Gone Name/);
    const marks = await (store as unknown as OutboxStore).getMarks(['leaderboard.changed|weekly|2026-03-02', 'leaderboard.runs|weekly']);
    expect(marks['leaderboard.changed|weekly|2026-03-02']).toBeUndefined();
    expect(marks['leaderboard.runs|weekly']).toBeDefined();
    // The next sweep announces the rankings as they are now (the mark was forgotten).
    await engine.sweep();
    const changed = (await allChanges(engine)).filter((e) => e.type === 'leaderboard.changed').at(-1);
    const now2 = (changed?.payload as { leaderboard: { rankings: { userId: string; rank: number }[] } }).leaderboard.rankings;
    expect(now2.map((r) => [r.userId, r.rank])).toEqual([
      ['stay', 1],
    ]);
  });
});
