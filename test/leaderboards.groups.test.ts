/**
 * docs/rules.md, section 7: "A user whose attribute changes moves to the new group with their value", on every
 * breakdown board they are on, whether or not the call also feeds that board: a profile update, an identify
 * and an event on another metric move them too (they used to stay in the old group until that board's value
 * next changed, and `getLeaderboard(key, { userId })`, which reads the user's current group, missed them).
 */
import { expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { onEachStore, setupOn } from './stores.js';

const config = defineConfig({
  timeZone: 'UTC',
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quiz', name: 'Quiz' },
  ],
  attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [
    { key: 'xp-by-plan', name: 'XP by plan', rankBy: 'points', pointsSystemKey: 'xp', start: '2020-01-01', breakdownAttributes: ['plan'] },
    { key: 'lessons-by-plan', name: 'Lessons by plan', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01', breakdownAttributes: ['plan'] },
    { key: 'lessons', name: 'Lessons', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' },
  ],
});

onEachStore('a user whose breakdown attribute changes moves on every breakdown board', (kind) => {
  const rows = async (engine: Awaited<ReturnType<typeof setupOn<typeof config>>>['engine'], key: 'xp-by-plan' | 'lessons-by-plan', plan: string) =>
    (await engine.getLeaderboard(key, { userAttributes: { plan } })).rankings.map((r) => [r.userId, r.rank, r.value]);

  it('an event on another metric moves the user, value and order kept', async () => {
    const { engine, advance } = await setupOn(kind, config);
    await engine.recordEvent('lessons', { user: { id: 'a', attributes: { plan: 'free' } }, value: 1 });
    advance(1000);
    await engine.recordEvent('lessons', { user: { id: 'b', attributes: { plan: 'pro' } }, value: 1 });
    advance(1000);
    // a moves to pro through an event that feeds none of these boards; a reached its value first: rank 1.
    const r = await engine.recordEvent('quiz', { user: { id: 'a', attributes: { plan: 'pro' } }, value: 1 });
    expect(Object.keys(r.leaderboards)).toEqual([]);
    expect(await rows(engine, 'xp-by-plan', 'pro')).toEqual([
      ['a', 1, 10],
      ['b', 2, 10],
    ]);
    expect(await rows(engine, 'xp-by-plan', 'free')).toEqual([]);
    expect(await rows(engine, 'lessons-by-plan', 'pro')).toEqual([
      ['a', 1, 1],
      ['b', 2, 1],
    ]);
    expect(await rows(engine, 'lessons-by-plan', 'free')).toEqual([]);
    // Read by user id: the user's current group.
    expect((await engine.getLeaderboard('lessons-by-plan', { userId: 'a' })).rankings.map((x) => x.userId)).toContain('a');
  });

  it('updateUser and identifyUser move the user too, and a later event counts on in the new group', async () => {
    const { engine, advance } = await setupOn(kind, config);
    await engine.recordEvent('lessons', { user: { id: 'a', attributes: { plan: 'free' } }, value: 2 });
    advance(1000);
    await engine.updateUser('a', { attributes: { plan: 'pro' } });
    expect(await rows(engine, 'lessons-by-plan', 'pro')).toEqual([['a', 1, 2]]);
    expect(await rows(engine, 'lessons-by-plan', 'free')).toEqual([]);
    advance(1000);
    await engine.identifyUser({ id: 'a', attributes: { plan: 'team' } });
    expect(await rows(engine, 'xp-by-plan', 'team')).toEqual([['a', 1, 20]]);
    expect(await rows(engine, 'xp-by-plan', 'pro')).toEqual([]);
    advance(1000);
    await engine.recordEvent('lessons', { user: { id: 'a' }, value: 3 });
    expect(await rows(engine, 'lessons-by-plan', 'team')).toEqual([['a', 1, 5]]);
    expect(await rows(engine, 'lessons-by-plan', 'pro')).toEqual([]);
    expect(await rows(engine, 'lessons-by-plan', 'free')).toEqual([]);
    // The board without a breakdown is untouched by the moves.
    expect((await engine.getLeaderboard('lessons')).rankings.map((x) => [x.userId, x.value])).toEqual([['a', 5]]);
  });
});
