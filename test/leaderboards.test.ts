import { describe, expect, it } from 'vitest';
import { defineConfig } from '../src/index.js';
import { runContaining } from '../src/core/leaderboards.js';
import { DAY, HOUR, setup } from './helpers.js';

const config = defineConfig({
  timeZone: 'America/New_York',
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  attributes: [{ key: 'country', name: 'Country', type: 'user' }],
  streak: { frequency: 'daily' },
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'signup', type: 'user_creation', points: 1 }] }],
  leaderboards: [
    { key: 'all-time', name: 'All time', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' },
    { key: 'top3', name: 'Top 3', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', maxParticipants: 3 },
    { key: 'weekly-xp', name: 'Weekly XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-05', runUnit: 'day', runInterval: 7, timeZone: 'Asia/Tokyo' },
    { key: 'monthly', name: 'Monthly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', end: '2026-03-31', runUnit: 'month', runInterval: 1, breakdownAttributes: ['country'] },
    { key: 'streaks', name: 'Longest streaks', rankBy: 'streak', start: '2026-01-01' },
    { key: 'later', name: 'Later', rankBy: 'metric', metricKey: 'lessons', start: '2027-01-01' },
  ],
});

const board = (key: string) => config.index.leaderboards.get(key) as NonNullable<ReturnType<typeof config.index.leaderboards.get>>;

describe('runs (semantics 7)', () => {
  it('day/7 runs start every 7 days from start, in the board zone', () => {
    const b = board('weekly-xp');
    expect(runContaining(b, '2026-01-05')).toEqual({ start: '2026-01-05', end: '2026-01-11' });
    expect(runContaining(b, '2026-01-11')).toEqual({ start: '2026-01-05', end: '2026-01-11' });
    expect(runContaining(b, '2026-01-12')).toEqual({ start: '2026-01-12', end: '2026-01-18' });
  });

  it('month runs are calendar-aligned to start, clipped to end; year runs likewise', () => {
    const m = board('monthly');
    expect(runContaining(m, '2026-02-28')).toEqual({ start: '2026-02-01', end: '2026-02-28' });
    expect(runContaining(m, '2026-03-15')).toEqual({ start: '2026-03-01', end: '2026-03-31' });
    const odd = defineConfig({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [
      { key: 'mid', name: 'Mid', rankBy: 'metric', metricKey: 'm', start: '2024-01-31', runUnit: 'month', runInterval: 1 },
      { key: 'yr', name: 'Year', rankBy: 'metric', metricKey: 'm', start: '2024-02-29', runUnit: 'year', runInterval: 1 },
    ] });
    const mid = odd.index.leaderboards.get('mid') as NonNullable<ReturnType<typeof odd.index.leaderboards.get>>;
    expect(runContaining(mid, '2024-02-29')).toEqual({ start: '2024-02-29', end: '2024-03-30' });
    expect(runContaining(mid, '2024-03-31')).toEqual({ start: '2024-03-31', end: '2024-04-29' });
    const yr = odd.index.leaderboards.get('yr') as NonNullable<ReturnType<typeof odd.index.leaderboards.get>>;
    expect(runContaining(yr, '2025-02-28')).toEqual({ start: '2025-02-28', end: '2026-02-27' });
  });

  it('events fall into runs by the board zone, not the user zone', async () => {
    // 2026-01-11T16:00Z is Monday 2026-01-12 01:00 in Tokyo: the second weekly run.
    const t = setup(config, '2026-01-11T16:00:00Z');
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1', tz: 'America/Los_Angeles' }, value: 1 });
    expect(r.leaderboards['weekly-xp']).toMatchObject({ start: '2026-01-12', end: '2026-01-18', rank: 1, value: 11 });
    t.set('2026-01-11T14:59:00Z'); // 23:59 Sunday in Tokyo
    const r2 = await t.engine.recordEvent('lessons', { user: { id: 'u2' }, value: 1 });
    expect(r2.leaderboards['weekly-xp']).toMatchObject({ start: '2026-01-05', end: '2026-01-11' });
  });
});

describe('entries, ranks and limits', () => {
  it('a user enters when their value is above 0; the response lists boards whose value changed, with the board fields', async () => {
    const t = setup(config);
    const zero = await t.engine.recordEvent('lessons', { user: { id: 'z' }, value: 0 });
    expect(Object.keys(zero.leaderboards)).toEqual(['weekly-xp']); // only the creation points changed a value
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 2 });
    expect(Object.keys(r.leaderboards).sort()).toEqual(['all-time', 'monthly', 'streaks', 'top3', 'weekly-xp']);
    expect(r.leaderboards['all-time']).toMatchObject({
      id: board('all-time').id, key: 'all-time', name: 'All time', description: null, rankBy: 'metric', runUnit: null, runInterval: null,
      maxParticipants: 1000, metricName: 'Lessons', metricKey: 'lessons', threshold: 0, start: '2026-01-01', end: null, previousRank: null, rank: 1,
    });
    expect((await t.engine.getLeaderboard('all-time')).rankings.map((x) => x.userId)).toEqual(['u1']);
  });

  it('ties rank by who reached the value first, then by user id', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 5 });
    t.advance(HOUR);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 5 });
    await t.engine.recordEvent('lessons', { user: { id: 'c' }, value: 5 });
    await t.engine.recordEvent('lessons', { user: { id: 'd' }, value: 6 });
    expect((await t.engine.getLeaderboard('all-time')).rankings.map((x) => [x.userId, x.rank, x.value])).toEqual([['d', 1, 6], ['b', 2, 5], ['a', 3, 5], ['c', 4, 5]]);
  });

  it('a full board admits a newcomer only above the threshold and evicts the lowest', async () => {
    const t = setup(config);
    for (const [id, v] of [['a', 10], ['b', 8], ['c', 5]] as const) await t.engine.recordEvent('lessons', { user: { id }, value: v });
    let page = await t.engine.getLeaderboard('top3');
    expect(page.threshold).toBe(5);
    const equal = await t.engine.recordEvent('lessons', { user: { id: 'd' }, value: 5 });
    expect(equal.leaderboards.top3).toMatchObject({ previousRank: null, rank: null, threshold: 5 });
    const above = await t.engine.recordEvent('lessons', { user: { id: 'e' }, value: 6 });
    expect(above.leaderboards.top3).toMatchObject({ previousRank: null, rank: 3, threshold: 6 });
    page = await t.engine.getLeaderboard('top3', { limit: 10 });
    expect(page.rankings.map((x) => x.userId)).toEqual(['a', 'b', 'e']);
    expect((await t.engine.getUserLeaderboard('c', 'top3')).rank).toBeNull();
  });

  it('previousRank and rank are null when not ranked before / after', async () => {
    const t = setup(config);
    const first = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
    expect(first.leaderboards['all-time']).toMatchObject({ previousRank: null, rank: 1 });
    const drop = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: -3 });
    expect(drop.leaderboards['all-time']).toMatchObject({ previousRank: 1, rank: null, value: 0 });
    const back = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(back.leaderboards['all-time']).toMatchObject({ previousRank: null, rank: 1 });
  });

  it('points boards count only points earned in the run', async () => {
    const t = setup(config, '2026-01-06T03:00:00Z'); // Tokyo 2026-01-06
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 }); // 1 + 30
    t.set('2026-01-12T03:00:00Z'); // next run
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(r.leaderboards['weekly-xp']).toMatchObject({ start: '2026-01-12', value: 10, rank: 1 });
    expect((await t.engine.getLeaderboard('weekly-xp', { run: '2026-01-08' })).rankings).toEqual([{ userId: 'u', userName: null, rank: 1, value: 31 }]);
  });

  it('a finished board (or past run) stays readable with run; status follows the dates', async () => {
    const t = setup(config, '2026-03-10T15:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u', attributes: { country: 'FR' } }, value: 4 });
    t.set('2026-05-01T15:00:00Z');
    expect((await t.engine.listLeaderboards()).map((b) => b.key)).not.toContain('monthly');
    expect((await t.engine.listLeaderboards({ includeFinished: true })).find((b) => b.key === 'monthly')?.status).toBe('finished');
    expect((await t.engine.listLeaderboards()).find((b) => b.key === 'later')?.status).toBe('scheduled');
    const past = await t.engine.getLeaderboard('monthly', { run: '2026-03-20', userAttributes: { country: 'FR' } });
    expect(past).toMatchObject({ status: 'finished', run: { start: '2026-03-01', end: '2026-03-31' } });
    expect(past.rankings.map((x) => [x.userId, x.value])).toEqual([['u', 4]]);
    expect((await t.engine.getLeaderboard('later')).status).toBe('scheduled');
    await expect(t.engine.getLeaderboard('monthly', { run: '2026-13-01' })).rejects.toMatchObject({ status: 400 });
    await expect(t.engine.getLeaderboard('nope' as 'monthly')).rejects.toMatchObject({ status: 404 });
  });

  it('"around me" reads with userId make offset relative to the user', async () => {
    const t = setup(config);
    for (let i = 1; i <= 9; i++) await t.engine.recordEvent('lessons', { user: { id: `u${i}`, name: `User ${i}` }, value: i });
    const around = await t.engine.getLeaderboard('all-time', { userId: 'u5', offset: -2, limit: 5 });
    expect(around.rankings.map((x) => [x.userId, x.rank, x.userName])).toEqual([['u7', 3, 'User 7'], ['u6', 4, 'User 6'], ['u5', 5, 'User 5'], ['u4', 6, 'User 4'], ['u3', 7, 'User 3']]);
    const top = await t.engine.getLeaderboard('all-time', { userId: 'u9', offset: -2, limit: 5 });
    expect(top.rankings.map((x) => x.rank)).toEqual([1, 2, 3]);
    expect((await t.engine.getLeaderboard('all-time', { offset: 7, limit: 5 })).rankings.map((x) => x.rank)).toEqual([8, 9]);
    expect((await t.engine.getLeaderboard('all-time', { userId: 'ghost' })).rankings).toEqual([]);
  });

  it('breakdown attributes split a board into groups with their own ranks', async () => {
    const t = setup(config, '2026-02-10T15:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'fr1', attributes: { country: 'FR' } }, value: 5 });
    await t.engine.recordEvent('lessons', { user: { id: 'de1', attributes: { country: 'DE' } }, value: 9 });
    const r = await t.engine.recordEvent('lessons', { user: { id: 'fr2', attributes: { country: 'FR' } }, value: 7 });
    expect(r.leaderboards.monthly).toMatchObject({ rank: 1, userAttributes: { country: 'FR' } });
    expect((await t.engine.getLeaderboard('monthly', { userAttributes: { country: 'FR' } })).rankings.map((x) => x.userId)).toEqual(['fr2', 'fr1']);
    expect((await t.engine.getLeaderboard('monthly', { userId: 'de1' })).rankings.map((x) => x.userId)).toEqual(['de1']);
    // Moving country moves the entry to the other group with its value.
    const moved = await t.engine.recordEvent('lessons', { user: { id: 'fr1', attributes: { country: 'DE' } }, value: 0 });
    expect(moved.leaderboards.monthly).toMatchObject({ rank: 2, value: 5, userAttributes: { country: 'DE' } });
    expect((await t.engine.getLeaderboard('monthly', { userAttributes: { country: 'FR' } })).rankings.map((x) => x.userId)).toEqual(['fr2']);
  });

  it('streak boards rank by the current streak length', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 1 });
    t.advance(DAY);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 1 });
    expect(r.leaderboards.streaks).toMatchObject({ rank: 1, value: 2, previousRank: 2 });
  });

  it('streak boards drop a lapsed streak when read, without waiting for that user\'s next call', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'lapses' }, value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'lapses' }, value: 1 });
    await t.engine.recordEvent('lessons', { user: { id: 'keeps' }, value: 1 });
    expect((await t.engine.getLeaderboard('streaks')).rankings.map((r) => [r.userId, r.value])).toEqual([['lapses', 2], ['keeps', 1]]);
    t.advance(2 * DAY); // 'lapses' misses a whole day; 'keeps' acts today
    await t.engine.recordEvent('lessons', { user: { id: 'keeps' }, value: 1 });
    expect((await t.engine.getLeaderboard('streaks')).rankings.map((r) => [r.userId, r.rank, r.value])).toEqual([['keeps', 1, 1]]);
    expect((await t.engine.getUserLeaderboard('lapses', 'streaks')).rank).toBeNull();
  });

  it('getUserLeaderboard gives rank, value and one history row per day', async () => {
    const t = setup(config);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 10 });
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    t.advance(DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 20 });
    const mine = await t.engine.getUserLeaderboard('u', 'all-time');
    expect(mine).toMatchObject({ rank: 1, value: 22 });
    expect(mine.history).toEqual([
      { date: '2026-01-06', previousRank: 2, rank: 1, previousValue: 2, value: 22 },
      { date: '2026-01-05', previousRank: null, rank: 2, previousValue: null, value: 2 },
    ]);
    expect((await t.engine.getUserLeaderboard('u', 'all-time', { numEvents: 1 })).history).toHaveLength(1);
    await expect(t.engine.getUserLeaderboard('u', 'all-time', { numEvents: 101 })).rejects.toMatchObject({ status: 400 });
  });
});
