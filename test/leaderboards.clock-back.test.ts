/**
 * A clock stepping back across the end of a run adds to the user's value in that earlier run, as a move
 * westwards does (docs/rules.md, section 7): on a board with a `timeZone` of its own, the state kept no entry
 * of earlier runs, so the call wrote its own part alone and replaced the user's value in the rankings
 * (5, then 2 instead of 7). Found by a time-zone fuzz. A run further back than the state keeps (more than 2
 * days before the latest) is left as it is rather than overwritten.
 */
import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const config = (timeZone?: string) =>
  defineConfig({
    timeZone: 'Europe/Paris',
    metrics: [{ key: 'm', name: 'M' }],
    leaderboards: [{ key: 'lb', name: 'LB', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'day', runInterval: 1, ...(timeZone ? { timeZone } : {}) }],
  });

describe.each([['Europe/Paris'], [undefined]])('a day board (timeZone %s)', (timeZone) => {
  it('a clock stepped back across midnight adds to the earlier run', async () => {
    let now = Date.parse('2026-03-02T22:50:00Z'); // 23:50 in Paris, 03-02
    const engine = createEngine({ config: config(timeZone), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 5 });
    now = Date.parse('2026-03-02T23:05:00Z'); // 00:05 on 03-03
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = Date.parse('2026-03-02T22:55:00Z'); // back to 23:55 on 03-02
    const res = await engine.recordEvent('m', { user: { id: 'u' }, value: 2 });
    expect(res.leaderboards.lb?.value).toBe(7);
    expect((await engine.getLeaderboard('lb', { run: '2026-03-02' })).rankings[0]?.value).toBe(7);
    expect((await engine.getLeaderboard('lb', { run: '2026-03-03' })).rankings[0]?.value).toBe(1);
  });

  it('a run further back than the state keeps is left as it is', async () => {
    let now = Date.parse('2026-03-02T12:00:00Z');
    const engine = createEngine({ config: config(timeZone), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 5 });
    now = Date.parse('2026-03-08T12:00:00Z');
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = Date.parse('2026-03-02T13:00:00Z'); // six days back
    const res = await engine.recordEvent('m', { user: { id: 'u' }, value: 2 });
    expect(res.leaderboards.lb).toBeUndefined();
    expect((await engine.getLeaderboard('lb', { run: '2026-03-02' })).rankings[0]?.value).toBe(5);
    expect((await engine.getLeaderboard('lb', { run: '2026-03-08' })).rankings[0]?.value).toBe(1);
    expect((await engine.getUserMetric('u', 'm')).current).toBe(8);
  });

  it('an earlier run within reach in which the user has no value yet takes the call\'s value', async () => {
    let now = Date.parse('2026-03-02T23:05:00Z'); // 00:05 on 03-03 in Paris: the user's first event
    const engine = createEngine({ config: config(timeZone), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
    await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
    now = Date.parse('2026-03-02T22:55:00Z'); // back to 23:55 on 03-02
    const res = await engine.recordEvent('m', { user: { id: 'u' }, value: 2 });
    expect(res.leaderboards.lb?.value).toBe(2);
    expect((await engine.getLeaderboard('lb', { run: '2026-03-02' })).rankings[0]?.value).toBe(2);
  });
});

it('a move westwards into a run the user has no value in yet counts there (a board on each user\'s zone)', async () => {
  const now = Date.parse('2026-03-02T20:00:00Z'); // 05:00 on 03-03 in Tokyo, 12:00 on 03-02 in Los Angeles
  const engine = createEngine({ config: config(), store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  await engine.recordEvent('m', { user: { id: 'w', tz: 'Asia/Tokyo' }, value: 1 });
  await engine.recordEvent('m', { user: { id: 'w', tz: 'America/Los_Angeles' }, value: 2 });
  expect((await engine.getLeaderboard('lb', { run: '2026-03-02' })).rankings.map((r) => r.value)).toEqual([2]);
  expect((await engine.getLeaderboard('lb', { run: '2026-03-03' })).rankings.map((r) => r.value)).toEqual([1]);
});
