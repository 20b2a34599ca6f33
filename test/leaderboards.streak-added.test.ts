/**
 * A streak board added to the configuration holds each user's streak from their next call, whatever that
 * call is (docs/rules.md, section 7: streak boards hold the length set at each user's last call). It stayed
 * empty until each user's streak next changed: a user on a 3-day streak who called again the same day was
 * not on it.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { sequentialIds } from '../src/testing/index.js';
import { freshStore, onEachStore } from './stores.js';

const base = { timeZone: 'UTC', metrics: [{ key: 'lessons', name: 'Lessons' }], streak: { frequency: 'daily' as const } };
const before = defineConfig(base);
const after = defineConfig({ ...base, leaderboards: [{ key: 'streaks', name: 'Streaks', rankBy: 'streak' as const, start: '2026-01-01' }] });

onEachStore('a streak board added later', (kind) => {
  it("holds each user's streak from their next call, an event that does not extend it or an identify call", async () => {
    const store = await freshStore(kind);
    let now = new Date('2026-01-05T10:00:00Z');
    const old = createEngine({ config: before, store, clock: () => now, newId: sequentialIds('a') });
    for (const day of ['05', '06', '07']) {
      now = new Date(`2026-01-${day}T10:00:00Z`);
      await old.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
      await old.recordEvent('lessons', { user: { id: 'v' }, value: 1 });
    }
    await old.recordEvent('lessons', { user: { id: 'idle' }, value: 1 });
    const engine = createEngine({ config: after, store, clock: () => now, newId: sequentialIds('b') });
    expect((await engine.getLeaderboard('streaks')).rankings).toEqual([]);
    // The same day: the streak does not change, the board gets it all the same (listed: its value changed).
    const r = await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(r.currentStreak.length).toBe(3);
    expect(r.leaderboards.streaks?.value).toBe(3);
    await engine.identifyUser({ id: 'v', name: 'V' });
    expect((await engine.getLeaderboard('streaks')).rankings.map((x) => [x.userId, x.value])).toEqual([
      ['u', 3],
      ['v', 3],
    ]);
    // A second call changes nothing more.
    expect((await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).leaderboards.streaks).toBeUndefined();
  });
});
