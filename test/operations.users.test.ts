/**
 * Issue 13, operations on users (docs/rules.md, "Operations on users"): deleteUser (erasure), resetUser and
 * getUserEvents, each on the memory store and PostgreSQL; erasure also on PostgreSQL + Redis ranks.
 */
import { PGlite } from '@electric-sql/pglite';
import Redis from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, type Engine, type Store } from '../src/index.js';
import { createPostgresStore, type PostgresClient } from '../src/postgres.js';
import { createRedisRankIndex, rebuildRankIndex, withRankIndex } from '../src/redis.js';
import { sequentialIds } from '../src/testing/index.js';
import { PG_URL, REDIS_URL, uniq } from './servers.js';
import { onEachStore, setupOn } from './stores.js';

const DAY = 86_400_000;
const START = '2026-03-02T09:00:00Z';

const usersConfig = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'quizzes', name: 'Quizzes' },
  ],
  attributes: [
    { key: 'country', name: 'Country', type: 'user' },
    { key: 'course', name: 'Course', type: 'event' },
  ],
  achievements: [
    { key: 'ten', name: 'Ten lessons', trigger: 'metric', metricKey: 'lessons', metricValue: 10 },
    { key: 'onboarded', name: 'Onboarded', trigger: 'api' },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 3 } },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [
        { key: 'starter', name: 'Starter', points: 0 },
        { key: 'learner', name: 'Learner', points: 50 },
        { key: 'expert', name: 'Expert', points: 100 },
      ],
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 },
        { key: 'signup', type: 'user_creation', points: 5 },
      ],
    },
  ],
  leaderboards: [
    { key: 'xp-board', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01' },
    { key: 'monthly', name: 'Monthly lessons', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', runUnit: 'month', runInterval: 1, breakdownAttributes: ['country'] },
    { key: 'top2', name: 'Top two', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', maxParticipants: 2 },
  ],
});

type UsersEngine = Engine<typeof usersConfig>;

/** The three users of most tests: `gone` ahead of everyone, with rows of every kind. */
async function populate(engine: UsersEngine, advance: (ms: number) => void) {
  await engine.recordEvent('lessons', { user: { id: 'a', name: 'Ann', attributes: { country: 'FR' } }, value: 4 }, { idempotencyKey: 'a-1' });
  await engine.recordEvent('lessons', { user: { id: 'gone', name: 'Gone', email: 'gone@example.com', attributes: { country: 'FR' } }, value: 8, attributes: { course: 'fr' } }, { idempotencyKey: 'k-1' });
  await engine.recordEvent('lessons', { user: { id: 'b', attributes: { country: 'DE' } }, value: 2 });
  await engine.completeAchievement('onboarded', { user: { id: 'gone' } });
  await engine.completeAchievement('onboarded', { user: { id: 'b' } });
  advance(DAY);
  await engine.recordEvent('lessons', { user: { id: 'gone' }, value: 3 }, { idempotencyKey: 'k-2' });
  await engine.recordEvent('quizzes', { user: { id: 'gone' }, value: 1 });
  // A change of breakdown group: the next event moves the entry from FR to DE (a removal the store remembers).
  await engine.identifyUser({ id: 'gone', attributes: { country: 'DE' } });
  await engine.recordEvent('lessons', { user: { id: 'gone' }, value: 1 });
  await engine.grantFreezes('gone', 1);
  await engine.updatePreferences('gone', { notifications: { recap: ['email'] } });
}

const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: { code?: string }) => e.code ?? String(e));

/** Every read of the engine that could show `userId`, as error codes or whether the user appears. */
async function revealed(engine: UsersEngine, store: Store, userId: string) {
  const summary = { aggregation: 'daily', startDate: '2026-03-01', endDate: '2026-03-10' } as const;
  const notFound = {
    getUser: await codeOf(engine.getUser(userId)),
    getUserAchievements: await codeOf(engine.getUserAchievements(userId, { includeIncomplete: true })),
    getStreak: await codeOf(engine.getStreak(userId)),
    getPointsSummary: await codeOf(engine.getPointsSummary(userId, 'xp')),
    getMetricEventSummary: await codeOf(engine.getMetricEventSummary(userId, 'lessons', summary)),
    getPointsEventSummary: await codeOf(engine.getPointsEventSummary(userId, 'xp', summary)),
    getUserMetrics: await codeOf(engine.getUserMetrics(userId)),
    getUserMetric: await codeOf(engine.getUserMetric(userId, 'lessons')),
    getUserLeaderboard: await codeOf(engine.getUserLeaderboard(userId, 'xp-board')),
    getUserEvents: await codeOf(engine.getUserEvents(userId)),
    getPreferences: await codeOf(engine.getPreferences(userId)),
    getProfile: await codeOf(engine.getProfile(userId)),
    accrue: await codeOf(engine.accrue(userId)),
  };
  const pages = [
    await engine.getLeaderboard('xp-board', { limit: 100 }),
    await engine.getLeaderboard('top2', { limit: 100 }),
    await engine.getLeaderboard('monthly', { limit: 100, userAttributes: { country: 'FR' } }),
    await engine.getLeaderboard('monthly', { limit: 100, userAttributes: { country: 'DE' } }),
  ];
  const listed = (await store.listUsers({ limit: 1000 })).includes(userId);
  const ledger = (await store.readUserLedger(userId, { limit: 10 })).rows.length;
  return {
    notFound,
    onBoards: pages.some((p) => p.rankings.some((r) => r.userId === userId)),
    relativePage: (await engine.getLeaderboard('xp-board', { userId, offset: -1, limit: 3 })).rankings.length,
    streaks: (await engine.getStreaks([userId])).length,
    listed,
    ledger,
  };
}

const hidden = {
  notFound: {
    getUser: 'NOT_FOUND',
    getUserAchievements: 'NOT_FOUND',
    getStreak: 'NOT_FOUND',
    getPointsSummary: 'NOT_FOUND',
    getMetricEventSummary: 'NOT_FOUND',
    getPointsEventSummary: 'NOT_FOUND',
    getUserMetrics: 'NOT_FOUND',
    getUserMetric: 'NOT_FOUND',
    getUserLeaderboard: 'NOT_FOUND',
    getUserEvents: 'NOT_FOUND',
    getPreferences: 'NOT_FOUND',
    getProfile: 'NOT_FOUND',
    accrue: 'NOT_FOUND',
  },
  onBoards: false,
  relativePage: 0,
  streaks: 0,
  listed: false,
  ledger: 0,
};

/** What the cross-user reads say (rarity, level summary, histograms, board pages), ids left out. */
async function crossUser(engine: UsersEngine) {
  const page = async (key: 'xp-board' | 'top2' | 'monthly', userAttributes?: Record<string, string>) =>
    (await engine.getLeaderboard(key, { limit: 100, ...(userAttributes ? { userAttributes } : {}) })).rankings.map((r) => [r.userId, r.rank, r.value]);
  const board = async (key: 'xp-board' | 'top2' | 'monthly', userAttributes?: Record<string, string>) => {
    const b = await engine.getLeaderboard(key, { limit: 100, ...(userAttributes ? { userAttributes } : {}) });
    return { threshold: b.threshold, rankings: await page(key, userAttributes) };
  };
  return {
    achievements: (await engine.listAchievements()).map((a) => [a.key, a.completions, a.rarity]),
    levels: (await engine.getLevelSummary('xp')).map((l) => [l.level.key, l.users]),
    histogram: await engine.getPointsHistogram('xp'),
    histogramFR: await engine.getPointsHistogram('xp', { userAttributes: { country: 'FR' } }),
    histogramDE: await engine.getPointsHistogram('xp', { userAttributes: { country: 'DE' } }),
    xp: await board('xp-board'),
    top2: await board('top2'),
    monthlyFR: await board('monthly', { country: 'FR' }),
    monthlyDE: await board('monthly', { country: 'DE' }),
  };
}

onEachStore('deleteUser', (kind) => {
  it('erases everything of the user: no read, page, summary or count reveals it', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await populate(t.engine, t.advance);
    expect((await revealed(t.engine, t.store, 'gone')).onBoards).toBe(true);
    expect(await t.engine.deleteUser('gone')).toEqual({ userId: 'gone', deleted: true });
    expect(await revealed(t.engine, t.store, 'gone')).toEqual(hidden);
    // The store keeps nothing of the user.
    expect(await t.store.loadUser('gone')).toBeNull();
    expect(await t.store.getIdempotencyRecord('gone', 'lessons', 'k-1')).toBeNull();
    expect(await t.store.readEvents('gone', { limit: 10 })).toEqual({ rows: [], next: null });
    for (const index of ['lb|xp-board|2026-01-01|', 'lb|top2|2026-01-01|', 'lb|monthly|2026-03-01|["FR"]', 'lb|monthly|2026-03-01|["DE"]', 'pt|xp', 'pa|xp|country|FR', 'pa|xp|country|DE']) {
      expect(await t.store.getEntry(index, 'gone')).toBeNull();
      expect(await t.store.readRankHistory(index, 'gone', 10)).toEqual([]);
    }
    // The others are as they were.
    expect((await t.engine.getUserMetric('a', 'lessons')).current).toBe(4);
    expect((await t.engine.getUserAchievements('b')).map((a) => a.key)).toEqual(['onboarded']);
  }, 60_000);

  it('counters, rarity, level summary, histograms and board pages right after the erasure equal those of a history without the user', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await populate(t.engine, t.advance);
    await t.engine.deleteUser('gone');
    // The same history without `gone`, recorded on a fresh store.
    const fresh = await setupOn(kind, usersConfig, START);
    await fresh.engine.recordEvent('lessons', { user: { id: 'a', name: 'Ann', attributes: { country: 'FR' } }, value: 4 }, { idempotencyKey: 'a-1' });
    await fresh.engine.recordEvent('lessons', { user: { id: 'b', attributes: { country: 'DE' } }, value: 2 });
    await fresh.engine.completeAchievement('onboarded', { user: { id: 'b' } });
    fresh.advance(DAY);
    expect(await crossUser(t.engine)).toEqual(await crossUser(fresh.engine));
    expect((await t.engine.listAchievements()).find((a) => a.key === 'onboarded')).toMatchObject({ completions: 1, rarity: 50 });
    expect(await t.store.getCounters(['users', 'achievement:onboarded', 'achievement:ten'])).toEqual({ users: 2, 'achievement:onboarded': 1, 'achievement:ten': 0 });
  }, 60_000);

  it('ranks of the others close the gap, also at a board full to maxParticipants', async () => {
    const t = await setupOn(kind, usersConfig, START);
    for (const [id, value] of [['first', 30], ['second', 20], ['third', 10]] as const) await t.engine.recordEvent('lessons', { user: { id }, value });
    expect((await t.engine.getUserLeaderboard('third', 'top2')).rank).toBeNull();
    expect((await t.engine.getLeaderboard('top2')).threshold).toBe(20);
    await t.engine.deleteUser('first');
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((r) => [r.userId, r.rank])).toEqual([['second', 1], ['third', 2]]);
    expect((await t.engine.getLeaderboard('top2')).rankings.map((r) => [r.userId, r.rank])).toEqual([['second', 1], ['third', 2]]);
    expect((await t.engine.getLeaderboard('top2')).threshold).toBe(10);
    expect((await t.engine.getUserLeaderboard('third', 'top2')).rank).toBe(2);
    expect((await t.engine.getUserLeaderboard('second', 'xp-board')).rank).toBe(1);
    // The next event's response ranks against the users that are left.
    const r = await t.engine.recordEvent('lessons', { user: { id: 'third' }, value: 15 });
    expect(r.leaderboards.top2).toMatchObject({ previousRank: 2, rank: 1, threshold: 20 });
  }, 60_000);

  it('a later call with the same id creates a brand-new user', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await populate(t.engine, t.advance);
    const before = await t.store.getCounters(['users', 'achievement:onboarded']);
    await t.engine.deleteUser('gone');
    t.advance(DAY);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'gone' }, value: 1 }, { idempotencyKey: 'k-1' });
    expect(r.idempotentReplayed).toBe(false);
    expect(r.total).toBe(1);
    expect(r.points.xp?.awards.map((a) => [a.trigger.type, a.awarded])).toEqual([['user_creation', 5], ['metric', 10]]);
    expect(r.currentStreak).toMatchObject({ length: 1, freezes: 1 });
    const user = await t.engine.getUser('gone');
    expect(user).toMatchObject({ name: null, email: null, attributes: {}, created: t.now().toISOString() });
    expect(await t.engine.getUserAchievements('gone')).toEqual([]);
    expect((await t.engine.getUserEvents('gone')).events.map((e) => [e.metricKey, e.value, e.idempotencyKey])).toEqual([['lessons', 1, 'k-1']]);
    expect((await t.engine.getPointsSummary('gone', 'xp')).total).toBe(15);
    expect((await t.engine.getUserLeaderboard('gone', 'xp-board')).history).toHaveLength(1);
    expect(await t.engine.getPreferences('gone')).toMatchObject({ notifications: { recap: ['email', 'push'] } });
    expect(await t.store.getCounters(['users', 'achievement:onboarded'])).toEqual({ users: before.users, 'achievement:onboarded': (before['achievement:onboarded'] ?? 0) - 1 });
  }, 60_000);

  it('an unknown user is NotFound, a bad id a ValidationError, and a second deletion NotFound; nothing changes', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 1 });
    await expect(t.engine.deleteUser('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.deleteUser('')).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.deleteUser(42 as unknown as string)).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(await t.store.getCounters(['users'])).toEqual({ users: 1 });
    await t.engine.deleteUser('a');
    await expect(t.engine.deleteUser('a')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await t.store.getCounters(['users'])).toEqual({ users: 0 });
  }, 60_000);

  it('racing recordEvent and deleteUser (one engine, and two engines on one store) leave no user or a whole new one, never half', async () => {
    const t = await setupOn(kind, usersConfig, START);
    const other = createEngine({ config: usersConfig, store: t.store, clock: t.now, newId: sequentialIds('other') });
    for (let round = 0; round < 6; round++) {
      const id = `race${round}`;
      await t.engine.recordEvent('lessons', { user: { id, attributes: { country: 'FR' } }, value: 10 });
      await t.engine.completeAchievement('onboarded', { user: { id } });
      const writer = round % 2 === 0 ? t.engine : other;
      const calls = [
        writer.recordEvent('lessons', { user: { id }, value: 1 }).then(() => 'event'),
        t.engine.deleteUser(id).then(() => 'delete'),
        writer.recordEvent('quizzes', { user: { id }, value: 2 }).then(() => 'event'),
      ];
      if (round >= 3) calls.reverse();
      await Promise.all(calls);
      const state = await t.store.loadUser(id);
      if (state === null) continue;
      // A fresh user: only events recorded after the erasure, none of the old progress.
      const events = (await t.engine.getUserEvents(id)).events;
      expect(events.length).toBeGreaterThan(0);
      const lessons = events.filter((e) => e.metricKey === 'lessons').reduce((s, e) => s + e.value, 0);
      expect((await t.engine.getUserMetric(id, 'lessons')).current).toBe(lessons);
      expect(lessons).toBeLessThan(10);
      expect((await t.engine.getUserAchievements(id)).map((a) => a.key)).toEqual([]);
      expect((await t.engine.getPointsSummary(id, 'xp')).total).toBe(5 + 10 * lessons);
    }
    // The counts agree with the users that are left.
    const users = await t.store.listUsers({ limit: 100 });
    const held = await Promise.all(users.map(async (u) => (await t.engine.getUserAchievements(u)).length));
    expect(await t.store.getCounters(['users', 'achievement:onboarded'])).toEqual({ users: users.length, 'achievement:onboarded': held.reduce((s, n) => s + n, 0) });
    expect((await t.engine.getLevelSummary('xp')).reduce((s, l) => s + l.users, 0)).toBe(users.length);
    expect((await t.engine.getLeaderboard('xp-board', { limit: 100 })).rankings.map((r) => r.userId).sort()).toEqual([...users].sort());
  }, 120_000);
});

onEachStore('resetUser', (kind) => {
  it('keeps the record and preferences, clears all progress, and counts as a new user as of the reset', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await populate(t.engine, t.advance);
    const record = await t.engine.getUser('gone');
    const prefs = await t.engine.getPreferences('gone');
    const others = await t.engine.getLeaderboard('xp-board', { limit: 100 });
    t.advance(DAY);
    const out = await t.engine.resetUser('gone');
    expect(out).toMatchObject({ userId: 'gone', reset: true, user: { ...record, created: t.now().toISOString(), updated: t.now().toISOString() } });
    expect(out.rankIndexPending).toBeUndefined();
    expect(await t.engine.getUser('gone')).toEqual(out.user);
    expect(await t.engine.getPreferences('gone')).toEqual(prefs);
    expect((await t.engine.getUserMetrics('gone')).map((m) => m.current)).toEqual([0, 0]);
    expect(await t.engine.getUserAchievements('gone')).toEqual([]);
    // A new user: the initial freeze and the user_creation award again.
    expect(await t.engine.getStreak('gone')).toMatchObject({ length: 0, freezes: 1 });
    const points = await t.engine.getPointsSummary('gone', 'xp');
    expect([points.total, points.level?.key, points.awards.map((a) => a.trigger.type)]).toEqual([5, 'starter', ['user_creation']]);
    expect((await t.engine.getUserEvents('gone')).events).toEqual([]);
    expect(await t.store.getIdempotencyRecord('gone', 'lessons', 'k-1')).toBeNull();
    // Boards: only what a new user has (the user_creation points of this run); rank history restarts.
    expect((await t.engine.getUserLeaderboard('gone', 'xp-board')).history).toEqual([{ date: '2026-03-04', previousRank: null, rank: 3, previousValue: null, value: 5 }]);
    expect((await t.engine.getLeaderboard('monthly', { userAttributes: { country: 'DE' } })).rankings.map((r) => r.userId)).toEqual(['b']);
    expect((await t.engine.getLeaderboard('monthly', { userAttributes: { country: 'FR' } })).rankings.map((r) => r.userId)).toEqual(['a']);
    expect((await t.engine.getLeaderboard('xp-board', { limit: 100 })).rankings.map((r) => [r.userId, r.value])).toEqual([
      ...others.rankings.filter((r) => r.userId !== 'gone').map((r) => [r.userId, r.value]),
      ['gone', 5],
    ]);
    // Bookkeeping: the user still counts; their achievements do not.
    expect(await t.store.getCounters(['users', 'achievement:onboarded'])).toEqual({ users: 3, 'achievement:onboarded': 1 });
    expect((await t.engine.getLevelSummary('xp')).map((l) => l.users)).toEqual([3, 0, 0]);
    // The ledger restarts with the row that creates the user: replay reproduces the reset user.
    expect((await t.store.readUserLedger('gone', { limit: 100 })).rows.map((r) => r.kind)).toEqual(['points', 'user', 'operation']);
    const replayed = await t.engine.replay({ policy: 'retroactive', dryRun: true, users: ['gone'] });
    expect(replayed.diffs.filter((d) => d.changed)).toEqual([]);
    // Progress starts again; an old idempotency key is new again.
    const r = await t.engine.recordEvent('lessons', { user: { id: 'gone' }, value: 10 }, { idempotencyKey: 'k-1' });
    expect([r.idempotentReplayed, r.total, r.achievements.map((a) => a.key)]).toEqual([false, 10, ['ten']]);
  }, 60_000);

  it('is NotFound for an unknown user and leaves other users alone', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 3 });
    await expect(t.engine.resetUser('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.resetUser('')).rejects.toMatchObject({ code: 'VALIDATION' });
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 1 });
    await t.engine.resetUser('b');
    expect((await t.engine.getUserMetric('a', 'lessons')).current).toBe(3);
    expect((await t.engine.getLeaderboard('top2')).rankings.map((x) => x.userId)).toEqual(['a']);
    expect(await t.store.getCounters(['users'])).toEqual({ users: 2 });
  }, 60_000);
});

onEachStore('getUserEvents', (kind) => {
  it('lists events newest first with value, total, attributes and idempotency key, paged by cursor and filtered by metric', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 2, attributes: { course: 'fr' } }, { idempotencyKey: 'k1' });
    t.advance(1000);
    await t.engine.recordEvent('quizzes', { user: { id: 'u' }, value: 1 });
    t.advance(1000);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
    await t.engine.recordEvent('lessons', { user: { id: 'other' }, value: 9 });
    t.advance(1000);
    await t.engine.recordEvent('quizzes', { user: { id: 'u' }, value: 4 }, { idempotencyKey: 'k2' });
    const all = await t.engine.getUserEvents('u');
    expect(all.next).toBeNull();
    expect(all.events.map((e) => [e.metricKey, e.value, e.total, e.idempotencyKey])).toEqual([
      ['quizzes', 4, 5, 'k2'],
      ['lessons', 3, 5, null],
      ['quizzes', 1, 1, null],
      ['lessons', 2, 2, 'k1'],
    ]);
    expect(all.events[3]).toEqual({ id: expect.any(String), metricKey: 'lessons', value: 2, total: 2, at: START.replace('Z', '.000Z'), attributes: { course: 'fr' }, idempotencyKey: 'k1' });
    expect(all.events[2]?.attributes).toEqual({});
    // Pages of two, then one metric.
    const first = await t.engine.getUserEvents('u', { limit: 2 });
    expect(first.events.map((e) => e.value)).toEqual([4, 3]);
    expect(first.next).not.toBeNull();
    const second = await t.engine.getUserEvents('u', { limit: 2, before: first.next as string });
    expect([second.events.map((e) => e.value), second.next]).toEqual([[1, 2], null]);
    expect((await t.engine.getUserEvents('u', { metricKey: 'lessons' })).events.map((e) => e.value)).toEqual([3, 2]);
    expect((await t.engine.getUserEvents('u', { metricKey: 'quizzes', limit: 1 })).events.map((e) => e.value)).toEqual([4]);
    // A cursor stays valid as events are added, and can be used with a metric filter.
    t.advance(1000);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 7 });
    expect((await t.engine.getUserEvents('u', { before: first.next as string, metricKey: 'lessons' })).events.map((e) => e.value)).toEqual([2]);
    expect((await t.engine.getUserEvents('u', { limit: 1 })).events.map((e) => e.value)).toEqual([7]);
  }, 60_000);

  it('pages of the default 20 and of 100, and the same instants in a stable order', async () => {
    const t = await setupOn(kind, usersConfig, START);
    // Same instant for every event: the order is by metric key, then latest first.
    for (let i = 0; i < 25; i++) await t.engine.recordEvent(i % 2 === 0 ? 'lessons' : 'quizzes', { user: { id: 'u' }, value: i + 1 });
    const first = await t.engine.getUserEvents('u');
    expect(first.events).toHaveLength(20);
    const rest = await t.engine.getUserEvents('u', { before: first.next as string });
    expect([rest.events.length, rest.next]).toEqual([5, null]);
    const values = [...first.events, ...rest.events].map((e) => e.value);
    const quizzes = Array.from({ length: 12 }, (_, i) => 24 - 2 * i);
    const lessons = Array.from({ length: 13 }, (_, i) => 25 - 2 * i);
    expect(values).toEqual([...quizzes, ...lessons]);
    expect((await t.engine.getUserEvents('u', { limit: 100 })).events.map((e) => e.value)).toEqual(values);
  }, 60_000);

  it('leaves out the reversal rows replay writes', async () => {
    const t = await setupOn(kind, usersConfig, START);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 2 });
    t.advance(1000);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
    // A reversal row as replay writes it (retroactive, for an event the configuration now refuses).
    const loaded = await t.store.loadUser('u');
    t.advance(1000);
    await t.store.commit({
      userId: 'u',
      expectedVersion: loaded?.version ?? 0,
      state: loaded?.state as never,
      ledger: [{ id: 'rev', userId: 'u', kind: 'metric', key: 'lessons', at: t.now().toISOString(), delta: -2, total: 3, data: { reverses: r.eventId } }],
      leaderboard: [],
      counters: {},
      idempotency: null,
    });
    expect((await t.engine.getUserEvents('u')).events.map((e) => e.value)).toEqual([3, 2]);
    const page = await t.engine.getUserEvents('u', { limit: 1 });
    expect(page.events.map((e) => e.value)).toEqual([3]);
    expect((await t.engine.getUserEvents('u', { limit: 1, before: page.next as string })).events.map((e) => e.value)).toEqual([2]);
  }, 60_000);

  it('validates its input', async () => {
    const t = await setupOn(kind, usersConfig, START);
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    for (const limit of [0, 101, 1.5, '5', Number.NaN]) await expect(t.engine.getUserEvents('u', { limit: limit as number })).rejects.toMatchObject({ code: 'VALIDATION' });
    for (const before of ['', 'garbage', 'x'.repeat(5000), 5]) await expect(t.engine.getUserEvents('u', { before: before as string })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(t.engine.getUserEvents('u', { metricKey: 'nope' as 'lessons' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.getUserEvents('nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.getUserEvents('')).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getUserEvents('u', { limit: 100 })).events).toHaveLength(1);
  }, 60_000);
});

describe.skipIf(!REDIS_URL)('deleteUser and resetUser on PostgreSQL + Redis ranks (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  const pglite = PG_URL ? null : new PGlite();
  const pool = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 4 }) : null;
  afterAll(async () => {
    await redis?.quit();
    await pglite?.close();
    await pool?.end();
  });

  async function setup(options: { failErase?: () => boolean } = {}) {
    const client = (pool ?? pglite) as unknown as PostgresClient;
    const pgStore = createPostgresStore({ client, schema: uniq('users_redis'), ranks: 'none' });
    await pgStore.migrate();
    const prefix = `${uniq('users')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix });
    const flaky = { ...index, erase: (userId: string, indexes: readonly string[], version?: number) => (options.failErase?.() ? Promise.reject(new Error('redis down')) : index.erase(userId, indexes, version)) };
    const errors: unknown[] = [];
    const degraded: unknown[] = [];
    const store = withRankIndex(pgStore, flaky, { onError: (e) => errors.push(e) });
    let now = new Date(START);
    const engine = createEngine({ config: usersConfig, store, clock: () => now, newId: sequentialIds(), onDegraded: (e) => degraded.push(e) });
    const advance = (ms: number) => {
      now = new Date(now.getTime() + ms);
    };
    /** Whether Redis holds anything of the user under an index: hash field, member, history list. */
    const inRedis = async (name: string, userId: string) => {
      const field = await (redis as Redis).hget(`${prefix}{${name}}:h`, userId);
      const history = await (redis as Redis).exists(`${prefix}{${name}}:r:${userId}`);
      return { field, history };
    };
    return { engine, store, pgStore, index, errors, degraded, advance, inRedis };
  }

  const indexes = ['lb|xp-board|2026-01-01|', 'lb|top2|2026-01-01|', 'lb|monthly|2026-03-01|["FR"]', 'lb|monthly|2026-03-01|["DE"]', 'pt|xp', 'pa|xp|country|FR', 'pa|xp|country|DE'];

  it('the sorted sets lose the user in every index, the removal it had left in the old group included; ranks close the gap', async () => {
    const t = await setup();
    await populate(t.engine, t.advance);
    // Before: the old group's index remembers the removed entry and its history.
    expect(await t.inRedis('lb|monthly|2026-03-01|["FR"]', 'gone')).toMatchObject({ field: expect.stringMatching(/\|\|$/), history: 1 });
    expect(await t.engine.deleteUser('gone')).toEqual({ userId: 'gone', deleted: true });
    for (const name of indexes) expect(await t.inRedis(name, 'gone')).toEqual({ field: null, history: 0 });
    expect(await revealed(t.engine, t.store, 'gone')).toEqual(hidden);
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((r) => [r.userId, r.rank])).toEqual([['a', 1], ['b', 2]]);
    expect(await t.index.countEntries('pt|xp')).toBe(2);
    expect((await t.engine.getLevelSummary('xp')).map((l) => l.users)).toEqual([2, 0, 0]);
    // Created again: versions start at 1, and Redis takes its writes.
    const r = await t.engine.recordEvent('lessons', { user: { id: 'gone' }, value: 1 });
    expect(r.leaderboards['xp-board']).toMatchObject({ rank: 3, value: 15 });
    expect(await t.index.getEntry('lb|xp-board|2026-01-01|', 'gone')).toMatchObject({ value: 15, rank: 3 });
    expect(t.errors).toEqual([]);
  }, 60_000);

  it('resetUser: Redis holds only the reset user, whose later writes go through', async () => {
    const t = await setup();
    await populate(t.engine, t.advance);
    await t.engine.resetUser('gone');
    expect(await t.inRedis('lb|monthly|2026-03-01|["DE"]', 'gone')).toMatchObject({ field: expect.stringMatching(/^\d+\|\|$/), history: 0 });
    expect(await t.index.getEntry('lb|xp-board|2026-01-01|', 'gone')).toMatchObject({ value: 5, rank: 3 });
    expect(await t.index.readRankHistory('lb|xp-board|2026-01-01|', 'gone', 10)).toEqual([{ date: '2026-03-03', previousRank: null, rank: 3, previousValue: null, value: 5 }]);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'gone' }, value: 2 });
    expect(r.leaderboards.monthly).toMatchObject({ rank: 2, value: 2 });
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((x) => [x.userId, x.value])).toEqual([['a', 45], ['b', 25], ['gone', 25]]);
  }, 60_000);

  it('resetUser, then deleteUser: Redis forgets the user in the indexes of the reset too, so a user created again under the id is ranked', async () => {
    const t = await setup();
    await populate(t.engine, t.advance);
    await t.engine.resetUser('gone');
    // The reset left its marker (version||) where the reset state has no entry.
    expect(await t.inRedis('lb|monthly|2026-03-01|["DE"]', 'gone')).toMatchObject({ field: expect.stringMatching(/^\d+\|\|$/) });
    expect(await t.engine.deleteUser('gone')).toEqual({ userId: 'gone', deleted: true });
    for (const name of indexes) expect(await t.inRedis(name, 'gone')).toEqual({ field: null, history: 0 });
    // Created again: versions start at 1, below the reset's, and Redis takes its writes.
    const r = await t.engine.recordEvent('lessons', { user: { id: 'gone', attributes: { country: 'DE' } }, value: 1 });
    expect(r.leaderboards.monthly).toMatchObject({ rank: 2, value: 1 });
    expect(r.leaderboards['xp-board']?.rank).not.toBeNull();
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((x) => x.userId)).toContain('gone');
    expect(t.errors).toEqual([]);
  }, 60_000);

  it('Redis down during the erasure: the erasure is durable, the call reports what Redis still shows, and erase or rebuildRankIndex removes it', async () => {
    let down = true;
    const t = await setup({ failErase: () => down });
    await populate(t.engine, t.advance);
    const out = await t.engine.deleteUser('gone');
    expect(out).toMatchObject({ userId: 'gone', deleted: true });
    // Every index the user was in (any other index kind the engine writes included), in order.
    expect(out.rankIndexPending).toEqual(expect.arrayContaining(indexes));
    expect(out.rankIndexPending).toEqual([...(out.rankIndexPending ?? [])].sort());
    expect(t.errors).toHaveLength(1);
    expect(t.degraded).toHaveLength(1);
    // The store, the source of truth, has erased the user; Redis still shows the old entry.
    expect(await t.pgStore.loadUser('gone')).toBeNull();
    expect(await t.pgStore.getEntry('lb|xp-board|2026-01-01|', 'gone')).toBeNull();
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((r) => r.userId)).toEqual(['gone', 'a', 'b']);
    down = false;
    // A rebuild of one index forgets the user there entirely (no tombstone keeps the id).
    await rebuildRankIndex(t.pgStore, t.index, 'lb|xp-board|2026-01-01|');
    expect(await t.inRedis('lb|xp-board|2026-01-01|', 'gone')).toEqual({ field: null, history: 0 });
    expect((await t.engine.getLeaderboard('xp-board')).rankings.map((r) => [r.userId, r.rank])).toEqual([['a', 1], ['b', 2]]);
    // The reported indexes, erased once Redis is back.
    await t.index.erase('gone', out.rankIndexPending ?? []);
    for (const name of indexes) expect(await t.inRedis(name, 'gone')).toEqual({ field: null, history: 0 });
    expect(await revealed(t.engine, t.store, 'gone')).toEqual(hidden);
  }, 60_000);
});
