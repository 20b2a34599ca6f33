/**
 * Issue 14, points: the hosted service's documented rules (docs/rules.md section 6), one test per rule, each
 * on the memory store and PostgreSQL.
 */
import { expect, it } from 'vitest';
import { attributeTotalsIndex, createEngine, defineConfig, pointsTotalsIndex } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { sequentialIds } from '../src/testing/index.js';
import { onEachStore, setupOn } from './stores.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const config = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'penalties', name: 'Penalties' },
  ],
  attributes: [
    { key: 'plan', name: 'Plan', type: 'user' },
    { key: 'country', name: 'Country', type: 'user' },
  ],
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [
        { key: 'bronze', name: 'Bronze', points: 0 },
        { key: 'silver', name: 'Silver', points: 100 },
      ],
      triggers: [
        { key: 'welcome', type: 'user_creation', points: 10 },
        { key: 'pro-welcome', type: 'user_creation', points: 100, userAttributes: { plan: 'pro' } },
        { key: 'pro-hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 5, userAttributes: { plan: 'pro' } },
        { key: 'uk-daily', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1000, userAttributes: { country: 'uk' } },
      ],
    },
    {
      key: 'score',
      name: 'Score',
      allowNegative: true,
      triggers: [
        { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 },
        { key: 'per-penalty', type: 'metric', metricKey: 'penalties', metricThreshold: 1, points: -1 },
      ],
    },
  ],
});

type Setup = Awaited<ReturnType<typeof setupOn<typeof config>>>;

const timeAwards = async (t: Setup, userId: string) =>
  (await t.engine.getPointsSummary(userId, 'xp', { awards: 100 })).awards
    .filter((a) => a.trigger.type === 'time')
    .map((a) => ({ trigger: a.trigger.id, date: a.date, awarded: a.awarded, count: a.grants?.count ?? 1 }))
    .reverse();

/** A user's score made exactly `total` (lessons up, penalties down), on a fresh user. */
async function scoreOf(t: Setup, id: string, total: number, attributes?: Record<string, string>) {
  const user = { id, ...(attributes ? { attributes } : {}) };
  if (total >= 0) await t.engine.recordEvent('lessons', { user, value: total });
  else await t.engine.recordEvent('penalties', { user, value: -total });
}

const usersOf = (histogram: { from: number; to: number; users: number }[]) => histogram.map((b) => `${b.from}-${b.to}:${b.users}`);

onEachStore('points trigger filters', (kind) => {
  it('user-attribute filters are allowed on every trigger type (time and user-creation triggers included)', async () => {
    const t = await setupOn(kind, config);
    const system = await t.engine.getPointsSystem('xp');
    const view = (key: string) => system.triggers.find((x) => x.id === config.index.pointsSystems.get('xp')?.triggers.find((c) => c.key === key)?.id);
    expect(view('pro-welcome')).toMatchObject({ type: 'user_creation', points: 100, userAttributes: [{ key: 'plan', value: 'pro' }] });
    expect(view('pro-hourly')).toMatchObject({ type: 'time', timeUnit: 'hour', timeInterval: 1, userAttributes: [{ key: 'plan', value: 'pro' }] });
    expect(view('welcome')).not.toHaveProperty('userAttributes');
    // An undeclared attribute is refused by the configuration on these types too.
    expect(() =>
      defineConfig({ metrics: [{ key: 'm', name: 'M' }], pointsSystems: [{ key: 'p', name: 'P', triggers: [{ key: 't', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1, userAttributes: { plan: 'pro' } }] }] }),
    ).toThrow(/"plan" is not a declared user attribute/);
  });

  it('a user_creation trigger with userAttributes pays only users who have them at creation', async () => {
    const t = await setupOn(kind, config);
    await t.engine.identifyUser({ id: 'pro', attributes: { plan: 'pro' } });
    const byEvent = await t.engine.recordEvent('lessons', { user: { id: 'pro-by-event', attributes: { plan: 'pro' } }, value: 1 });
    expect(byEvent.points.xp?.awards.map((a) => [a.trigger.id, a.awarded])).toEqual([
      [config.pointsSystems[0]?.triggers[0]?.id, 10],
      [config.pointsSystems[0]?.triggers[1]?.id, 100],
    ]);
    await t.engine.identifyUser({ id: 'free', attributes: { plan: 'free' } });
    // Gaining the attribute later pays nothing: the trigger fires once, at creation.
    await t.engine.updateUser('free', { attributes: { plan: 'pro' } });
    expect((await t.engine.getPointsSummary('pro', 'xp')).total).toBe(110);
    expect((await t.engine.getPointsSummary('pro-by-event', 'xp')).total).toBe(110);
    expect((await t.engine.getPointsSummary('free', 'xp')).total).toBe(10);
  });

  it('a time trigger filtered by an attribute grants only while the user has it', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.identifyUser({ id: 'u1', attributes: { plan: 'free' } });
    // Gained at 12:30: the grants due at 11:00 and 12:00 fell due while the user was free.
    t.set('2026-01-05T12:30:00Z');
    await t.engine.updateUser('u1', { attributes: { plan: 'pro' } });
    expect(await timeAwards(t, 'u1')).toEqual([]);
    // Lazily, with no call in between: 13:00, 14:00 and 15:00 are due and show on reads.
    t.set('2026-01-05T15:30:00Z');
    expect((await t.engine.getPointsSummary('u1', 'xp')).total).toBe(10 + 15);
    // Lost at 15:30: the grants due while the user was pro are paid (one run dated at its first grant) ...
    const lost = await t.engine.updateUser('u1', { attributes: { plan: 'free' } });
    expect(lost.attributes).toEqual({ plan: 'free' });
    expect(await timeAwards(t, 'u1')).toEqual([{ trigger: config.pointsSystems[0]?.triggers[2]?.id, date: '2026-01-05T13:00:00.000Z', awarded: 15, count: 3 }]);
    // ... and none after.
    t.set('2026-01-05T20:00:00Z');
    expect((await t.engine.getPointsSummary('u1', 'xp')).total).toBe(25);
    // A call exactly at a grant's instant judges that grant by the attributes before it (gained at 20:00:
    // the 20:00 grant passes by, 21:00 and 22:00 are paid, the schedule still counted from creation).
    await t.engine.recordEvent('lessons', { user: { id: 'u1', attributes: { plan: 'pro' } }, value: 1 });
    t.set('2026-01-05T22:10:00Z');
    await t.engine.accrue('u1');
    expect((await timeAwards(t, 'u1')).slice(1)).toEqual([{ trigger: config.pointsSystems[0]?.triggers[2]?.id, date: '2026-01-05T21:00:00.000Z', awarded: 10, count: 2 }]);
    expect((await t.engine.getPointsSummary('u1', 'xp')).total).toBe(35);
    // The chart counts each grant when it fell due.
    const daily = await t.engine.getPointsEventSummary('u1', 'xp', { aggregation: 'daily', startDate: '2026-01-05', endDate: '2026-01-05' });
    expect(daily).toEqual([{ date: '2026-01-05', total: 35, change: 35 }]);
  });

  it('a daily time trigger filtered by an attribute counts from the creation day, paying the midnights the user had it', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.identifyUser({ id: 'd1', tz: 'Europe/London' });
    t.set('2026-01-07T09:00:00Z'); // midnights of the 6th and 7th passed without the attribute
    await t.engine.updateUser('d1', { attributes: { country: 'uk' } });
    t.set('2026-01-09T12:00:00Z'); // the 8th and 9th with it
    await t.engine.updateUser('d1', { attributes: { country: 'fr' } });
    t.advance(3 * DAY);
    const summary = await t.engine.getPointsSummary('d1', 'xp');
    expect(summary.total).toBe(10 + 2000);
    expect(summary.awards.filter((a) => a.trigger.type === 'time').map((a) => [a.date, a.awarded])).toEqual([['2026-01-08T00:00:00.000Z', 2000]]);
  });

  it("a time grant's boosts, like its filter, are judged by the attributes the user had when it fell due", async () => {
    const boosted = defineConfig({
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
      pointsSystems: [
        {
          key: 'energy',
          name: 'Energy',
          triggers: [{ key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 10 }],
          boosts: [{ key: 'pro', name: 'Pro', multiplier: 2, start: '2026-01-01', userAttributes: { plan: 'pro' } }],
        },
      ],
    });
    const t = await setupOn(kind, boosted, '2026-01-05T10:00:00Z');
    await t.engine.identifyUser({ id: 'b1', attributes: { plan: 'free' } });
    t.set('2026-01-05T12:30:00Z');
    const gained = await t.engine.identifyUser({ id: 'b1', attributes: { plan: 'pro' } });
    expect(gained.attributes).toEqual({ plan: 'pro' });
    t.set('2026-01-05T13:30:00Z');
    await t.engine.identifyUser({ id: 'b1', attributes: { plan: 'free' } });
    const awards = (await t.engine.getPointsSummary('b1', 'energy')).awards.reverse();
    expect(awards.map((a) => [a.date, a.awarded, a.boosts?.length ?? 0])).toEqual([
      ['2026-01-05T11:00:00.000Z', 10, 0],
      ['2026-01-05T12:00:00.000Z', 10, 0],
      ['2026-01-05T13:00:00.000Z', 20, 1],
    ]);
  });

  it('replay reproduces the grants of attribute-filtered triggers from the user rows', async () => {
    const t = await setupOn(kind, config, '2026-01-05T10:00:00Z');
    await t.engine.identifyUser({ id: 'r1', attributes: { plan: 'free' } });
    await t.engine.identifyUser({ id: 'r2', attributes: { plan: 'pro', country: 'uk' } });
    t.set('2026-01-05T12:30:00Z');
    await t.engine.updateUser('r1', { attributes: { plan: 'pro' } });
    t.set('2026-01-06T03:30:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'r1', attributes: { plan: 'free', country: 'uk' } }, value: 2 });
    await t.engine.updateUser('r2', { attributes: { plan: 'free' } });
    const before = [(await t.engine.getPointsSummary('r1', 'xp')).total, (await t.engine.getPointsSummary('r2', 'xp')).total];
    expect(before).toEqual([10 + 15 * 5, 110 + 17 * 5 + 1000]);
    const report = await t.engine.replay({ policy: 'retroactive', users: ['r1', 'r2'], dryRun: true });
    expect(report.diffs).toEqual([]);
    const real = await t.engine.replay({ policy: 'retroactive', users: ['r1', 'r2'] });
    expect(real.changed).toBe(0);
    expect([(await t.engine.getPointsSummary('r1', 'xp')).total, (await t.engine.getPointsSummary('r2', 'xp')).total]).toEqual(before);
  });
});

onEachStore('points histogram', (kind) => {
  it('getPointsHistogram uses the service buckets: 0-0, then ten equal ranges from 1 to the highest total rounded up to a power of ten', async () => {
    const t = await setupOn(kind, config);
    for (const [id, total] of [['a', 0], ['b', 1], ['c', 100], ['d', 101], ['e', 950], ['f', 901], ['g', 900]] as const) await scoreOf(t, id, total);
    expect(usersOf(await t.engine.getPointsHistogram('score'))).toEqual([
      '0-0:1',
      '1-100:2',
      '101-200:1',
      '201-300:0',
      '301-400:0',
      '401-500:0',
      '501-600:0',
      '601-700:0',
      '701-800:0',
      '801-900:1',
      '901-1000:2',
    ]);
    // A highest total that is a power of ten is its own top; one above it moves to the next.
    await scoreOf(t, 'h', 1000);
    expect((await t.engine.getPointsHistogram('score'))[10]).toEqual({ from: 901, to: 1000, users: 3 });
    await scoreOf(t, 'i', 1001);
    expect(usersOf(await t.engine.getPointsHistogram('score')).slice(0, 3)).toEqual(['0-0:1', '1-1000:7', '1001-2000:1']);
  });

  it('a highest total below 10 (or none) rounds up to 10: ranges 1-1 to 10-10', async () => {
    const t = await setupOn(kind, config);
    expect(usersOf(await t.engine.getPointsHistogram('score'))).toEqual(['0-0:0', '1-1:0', '2-2:0', '3-3:0', '4-4:0', '5-5:0', '6-6:0', '7-7:0', '8-8:0', '9-9:0', '10-10:0']);
    await scoreOf(t, 'a', 0);
    await scoreOf(t, 'b', 3);
    await scoreOf(t, 'c', 3);
    expect(usersOf(await t.engine.getPointsHistogram('score'))).toEqual(['0-0:1', '1-1:0', '2-2:0', '3-3:2', '4-4:0', '5-5:0', '6-6:0', '7-7:0', '8-8:0', '9-9:0', '10-10:0']);
  });

  it('a range from..to holds the totals t with from - 1 < t <= to (a decimal total at a boundary goes up)', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'a', 100);
    await scoreOf(t, 'b', 101);
    await scoreOf(t, 'c', 5);
    // Points are whole numbers; a store holding decimal totals (written by hand here) is read by the same rule.
    const loaded = await t.store.loadUser('c');
    await t.store.commit({
      userId: 'c',
      expectedVersion: loaded?.version ?? 0,
      state: loaded!.state,
      ledger: [],
      leaderboard: [{ index: pointsTotalsIndex('score'), userId: 'c', value: 100.5, reachedAt: '2026-01-05T10:00:00.000Z', date: '2026-01-05', unranked: true }],
      counters: {},
      idempotency: null,
    });
    const histogram = await t.engine.getPointsHistogram('score');
    expect(histogram[1]).toEqual({ from: 1, to: 100, users: 1 });
    expect(histogram[2]).toEqual({ from: 101, to: 200, users: 2 });
  });

  it('negative totals (allowNegative) count in the first bucket, 0-0', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'a', -5);
    await scoreOf(t, 'b', 0);
    await scoreOf(t, 'c', 20);
    const histogram = await t.engine.getPointsHistogram('score');
    expect(histogram[0]).toEqual({ from: 0, to: 0, users: 2 });
    expect(histogram.reduce((s, b) => s + b.users, 0)).toBe(3);
  });

  it('userAttributes filters the users counted: one attribute', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'p1', 40, { plan: 'pro' });
    await scoreOf(t, 'p2', 0, { plan: 'pro', country: 'uk' });
    await scoreOf(t, 'f1', 950, { plan: 'free' });
    await scoreOf(t, 'n1', 7);
    // The filtered group's own highest total sets the ranges (40 -> 1-10, ..., 91-100).
    expect(usersOf(await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'pro' } }))).toEqual([
      '0-0:1',
      '1-10:0',
      '11-20:0',
      '21-30:0',
      '31-40:1',
      '41-50:0',
      '51-60:0',
      '61-70:0',
      '71-80:0',
      '81-90:0',
      '91-100:0',
    ]);
    expect((await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'free' } }))[10]).toEqual({ from: 901, to: 1000, users: 1 });
    expect((await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'none' } })).every((b) => b.users === 0)).toBe(true);
    expect((await t.engine.getPointsHistogram('score', { userAttributes: {} })).reduce((s, b) => s + b.users, 0)).toBe(4);
    await expect(t.engine.getPointsHistogram('score', { userAttributes: { tier: 'x' } })).rejects.toMatchObject({ code: 'INVALID_ATTRIBUTE_KEYS', status: 400 });
  });

  it('userAttributes filters the users counted: users matching all of several attributes', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'a', 30, { plan: 'pro', country: 'uk' });
    await scoreOf(t, 'b', 12, { plan: 'pro', country: 'uk' });
    await scoreOf(t, 'c', 500, { plan: 'pro', country: 'fr' });
    await scoreOf(t, 'd', 800, { plan: 'free', country: 'uk' });
    await scoreOf(t, 'e', 0, { plan: 'pro', country: 'uk' });
    const histogram = await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'pro', country: 'uk' } });
    expect(usersOf(histogram)).toEqual(['0-0:1', '1-10:0', '11-20:1', '21-30:1', '31-40:0', '41-50:0', '51-60:0', '61-70:0', '71-80:0', '81-90:0', '91-100:0']);
    expect((await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'free', country: 'fr' } })).every((b) => b.users === 0)).toBe(true);
    // Over HTTP: the service's `attribute:value,attribute:value` query.
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const res = await handler(new Request('http://x/v1/points/score/summary?userAttributes=plan:pro,country:uk', { headers: { 'x-api-key': 'k' } }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(histogram);
  });

  it('a user whose attribute changed is counted only in the new group', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'mover', 60, { plan: 'free', country: 'uk' });
    await scoreOf(t, 'stay', 5, { plan: 'free', country: 'uk' });
    await t.engine.updateUser('mover', { attributes: { plan: 'pro' } });
    const count = async (userAttributes: Record<string, string>) => (await t.engine.getPointsHistogram('score', { userAttributes })).reduce((s, b) => s + b.users, 0);
    expect(await count({ plan: 'free' })).toBe(1);
    expect(await count({ plan: 'pro' })).toBe(1);
    expect(await count({ plan: 'pro', country: 'uk' })).toBe(1);
    expect(await count({ plan: 'free', country: 'uk' })).toBe(1);
    expect(await t.store.getEntry(attributeTotalsIndex('score', 'plan', 'free'), 'mover')).toBeNull();
    // Its later points move with it, into the new group only.
    await t.engine.recordEvent('lessons', { user: { id: 'mover' }, value: 40 });
    expect((await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'pro' } }))[10]).toEqual({ from: 91, to: 100, users: 1 });
    expect((await t.store.getEntry(attributeTotalsIndex('score', 'country', 'uk'), 'mover'))?.value).toBe(100);
    // A long value is named by a hash, like a long breakdown group.
    await t.engine.updateUser('stay', { attributes: { plan: 'x'.repeat(1000) } });
    expect(await count({ plan: 'x'.repeat(1000) })).toBe(1);
  });

  it('users written before the attribute totals indexes are counted after their next call or a replay', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'old1', 30, { plan: 'pro' });
    await scoreOf(t, 'old2', 50, { plan: 'pro' });
    // As a state of an earlier version leaves them: another points fingerprint, no attribute entries.
    for (const id of ['old1', 'old2']) {
      const loaded = (await t.store.loadUser(id))!;
      const [a, s] = loaded.state.rules.split('.');
      await t.store.commit({
        userId: id,
        expectedVersion: loaded.version,
        state: { ...loaded.state, rules: `${a}.${s}.00000000` },
        ledger: [],
        leaderboard: ['plan'].map((k) => ({ index: attributeTotalsIndex('score', k, 'pro'), userId: id, remove: true as const, date: '2026-01-05', unranked: true })),
        counters: {},
        idempotency: null,
      });
    }
    const pro = async () => (await t.engine.getPointsHistogram('score', { userAttributes: { plan: 'pro' } })).reduce((s, b) => s + b.users, 0);
    expect(await pro()).toBe(0);
    await t.engine.accrue('old1');
    expect(await pro()).toBe(1);
    const later = createEngine({ config, store: t.store, clock: () => t.now(), newId: sequentialIds('later-') });
    await later.replay();
    expect(await pro()).toBe(2);
  });
});

onEachStore('points level summary', (kind) => {
  it('getLevelSummary on a system without levels is an error with status 422', async () => {
    const t = await setupOn(kind, config);
    await scoreOf(t, 'a', 5);
    await expect(t.engine.getLevelSummary('score')).rejects.toMatchObject({ name: 'NoLevelsError', code: 'NO_LEVELS', status: 422, pointsSystemKey: 'score' });
    expect((await t.engine.getLevelSummary('xp')).map((l) => [l.level.key, l.users])).toEqual([
      ['bronze', 1],
      ['silver', 0],
    ]);
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const res = await handler(new Request('http://x/v1/points/score/level-summary', { headers: { 'x-api-key': 'k' } }));
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ error: 'Points system "score" has no levels.' });
  });

  it("keeps Laurel's rule: the event response always carries the current level", async () => {
    const t = await setupOn(kind, config);
    const r = await t.engine.recordEvent('lessons', { user: { id: 'a', attributes: { plan: 'pro' } }, value: 1 });
    expect(r.points.xp).toMatchObject({ total: 110, level: { key: 'silver' } });
    expect(r.points.score).toMatchObject({ total: 1, level: null });
  });
});
