import { describe, expect, it } from 'vitest';
import { defineConfig, InsufficientPointsError } from '../src/index.js';
import { DAY, eachGrant, HOUR, setup } from './helpers.js';

const xpConfig = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }, { key: 'plan', name: 'Plan', type: 'user' }],
  achievements: [{ key: 'onboarded', name: 'Onboarded', trigger: 'api' }],
  streak: { frequency: 'daily' },
  pointsSystems: [
    {
      key: 'xp',
      name: 'XP',
      levels: [
        { key: 'bronze', name: 'Bronze', description: 'Start', points: 0 },
        { key: 'silver', name: 'Silver', points: 100 },
        { key: 'gold', name: 'Gold', points: 200 },
      ],
      allowNegative: false,
      triggers: [
        { key: 'per-five-lessons', type: 'metric', metricKey: 'lessons', metricThreshold: 5, points: 10 },
        { key: 'pro-ios-words', type: 'metric', metricKey: 'words', metricThreshold: 1, points: 1, eventAttributes: { device: 'ios' }, userAttributes: { plan: 'pro' } },
        { key: 'two-day-streak', type: 'streak', streakLengthThreshold: 2, points: 50 },
        { key: 'onboarded', type: 'achievement', achievementKey: 'onboarded', points: 25 },
        { key: 'signup', type: 'user_creation', points: 5 },
      ],
    },
    { key: 'penalty', name: 'Penalty', triggers: [{ key: 'per-word', type: 'metric', metricKey: 'words', metricThreshold: 1, points: -100 }] },
  ],
});

const u = { id: 'u1' };

describe('metric triggers (semantics 6)', () => {
  it('an event crossing three multiples of the threshold makes one award of points x 3', async () => {
    const t = setup(xpConfig);
    const r = await t.engine.recordEvent('lessons', { user: u, value: 17 });
    const awards = r.points.xp?.awards ?? [];
    expect(awards.map((a) => [a.trigger.type, a.awarded, a.total])).toEqual([
      ['user_creation', 5, 5],
      ['metric', 30, 35],
    ]);
    expect(awards[1]?.trigger).toEqual({ id: xpConfig.pointsSystems[0]?.triggers[0]?.id, type: 'metric', points: 10, metricId: xpConfig.metrics[0]?.id, metricName: 'Lessons', metricThreshold: 5 });
    expect(r.points.xp).toMatchObject({ key: 'xp', name: 'XP', description: null, badgeUrl: null, maxPoints: null, total: 35, added: 35 });
  });

  it('a decrease followed by an increase never pays twice (high-water mark)', async () => {
    const t = setup(xpConfig);
    await t.engine.recordEvent('lessons', { user: u, value: 5 });
    await t.engine.recordEvent('lessons', { user: u, value: -5 });
    const back = await t.engine.recordEvent('lessons', { user: u, value: 5 });
    expect(back.points).toEqual({});
    const beyond = await t.engine.recordEvent('lessons', { user: u, value: 5 });
    expect(beyond.points.xp?.added).toBe(10);
  });

  it('filters: event attributes and user attributes must match', async () => {
    const t = setup(xpConfig);
    const free = await t.engine.recordEvent('words', { user: { id: 'f', attributes: { plan: 'free' } }, value: 3, attributes: { device: 'ios' } });
    expect(free.points.xp?.awards.map((a) => a.trigger.type)).toEqual(['user_creation']);
    const web = await t.engine.recordEvent('words', { user: { id: 'p', attributes: { plan: 'pro' } }, value: 3, attributes: { device: 'web' } });
    expect(web.points.xp?.awards.map((a) => a.trigger.type)).toEqual(['user_creation']);
    const ios = await t.engine.recordEvent('words', { user: { id: 'p' }, value: 3, attributes: { device: 'ios' } });
    expect(ios.points.xp?.added).toBe(3);
  });

  it('the total never goes below 0 without allowNegative: the award is cut, and one cut to 0 is not recorded', async () => {
    const t = setup(xpConfig);
    const r = await t.engine.recordEvent('words', { user: u, value: 1 });
    expect(r.points.penalty).toBeUndefined(); // -100 on a total of 0 cuts to 0: nothing recorded
    expect((await t.engine.getPointsSummary('u1', 'penalty')).awards).toEqual([]);
  });

  it('allowNegative lets the total go below 0', async () => {
    const cfg = defineConfig({ metrics: [{ key: 'm', name: 'M' }], pointsSystems: [{ key: 'debt', name: 'Debt', allowNegative: true, triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: -3 }] }] });
    const t = setup(cfg);
    expect((await t.engine.recordEvent('m', { user: u, value: 2 })).points.debt).toMatchObject({ total: -6, added: -6 });
  });
});

describe('streak, achievement and creation triggers', () => {
  it('streak triggers fire each time the length reaches a multiple of the threshold', async () => {
    const t = setup(xpConfig);
    const xpStreakAwards = async () => (await t.engine.recordEvent('lessons', { user: u, value: 1 })).points.xp?.awards.filter((a) => a.trigger.type === 'streak').length ?? 0;
    const fired = [];
    for (let d = 0; d < 5; d++) {
      fired.push(await xpStreakAwards());
      t.advance(DAY);
    }
    expect(fired).toEqual([0, 1, 0, 1, 0]);
  });

  it('achievement triggers fire when the achievement unlocks, once', async () => {
    const t = setup(xpConfig);
    const done = await t.engine.completeAchievement('onboarded', { user: u });
    expect(done.points.xp?.awards.map((a) => [a.trigger.type, a.awarded])).toEqual([['user_creation', 5], ['achievement', 25]]);
    expect(done.points.xp?.awards[1]?.trigger).toMatchObject({ achievementId: xpConfig.achievements[0]?.id, achievementName: 'Onboarded' });
    expect((await t.engine.completeAchievement('onboarded', { user: u })).points).toEqual({});
  });

  it('user_creation fires once, for users created by identify too', async () => {
    const t = setup(xpConfig);
    await t.engine.identifyUser({ id: 'new' });
    expect((await t.engine.getPointsSummary('new', 'xp')).total).toBe(5);
    await t.engine.identifyUser({ id: 'new', name: 'N' });
    expect((await t.engine.getPointsSummary('new', 'xp')).total).toBe(5);
  });
});

describe('levels', () => {
  it('the level is the highest at or below the total, up and down', async () => {
    const cfg = defineConfig({
      metrics: [{ key: 'm', name: 'M' }],
      pointsSystems: [{ key: 'xp', name: 'XP', levels: [{ key: 'one', name: 'One', points: 10 }, { key: 'two', name: 'Two', points: 20 }], triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }, { key: 'refund', type: 'metric', metricKey: 'm', metricThreshold: 1, points: -1, eventAttributes: { kind: 'refund' } }] }],
      attributes: [{ key: 'kind', name: 'Kind', type: 'event' }],
    });
    const t = setup(cfg);
    expect((await t.engine.recordEvent('m', { user: u, value: 5 })).points.xp?.level).toBeNull();
    expect((await t.engine.recordEvent('m', { user: u, value: 16 })).points.xp?.level?.key).toBe('two');
    // A refund: +3 and -3 on separate triggers; then a -9 correction through the consuming trigger.
    const down = await t.engine.recordEvent('m', { user: u, value: 12, attributes: { kind: 'refund' } });
    expect(down.points.xp).toMatchObject({ total: 21, added: 0 });
    const cfgDown = defineConfig({ metrics: [{ key: 'm', name: 'M' }, { key: 'spend', name: 'Spend' }], pointsSystems: [{ key: 'xp', name: 'XP', levels: [{ key: 'one', name: 'One', points: 10 }, { key: 'two', name: 'Two', points: 20 }], triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 1 }, { key: 'per-spend', type: 'metric', metricKey: 'spend', metricThreshold: 1, points: -1 }] }] });
    const t2 = setup(cfgDown);
    expect((await t2.engine.recordEvent('m', { user: u, value: 25 })).points.xp?.level?.key).toBe('two');
    expect((await t2.engine.recordEvent('spend', { user: u, value: 10 })).points.xp).toMatchObject({ total: 15, level: { key: 'one', name: 'One', description: '', badgeUrl: null, points: 10 } });
    expect((await t2.engine.recordEvent('spend', { user: u, value: 10 })).points.xp?.level).toBeNull();
    expect(await t2.engine.getLevels('xp')).toHaveLength(2);
  });
});

const energyConfig = defineConfig({
  metrics: [{ key: 'flashcards', name: 'Flashcards' }],
  pointsSystems: [
    {
      key: 'energy',
      name: 'Energy',
      maxPoints: 5,
      triggers: [
        { key: 'signup', type: 'user_creation', points: 5 },
        { key: 'hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 },
        { key: 'per-flashcard', type: 'metric', metricKey: 'flashcards', metricThreshold: 1, points: -1, blockIfOutOfPoints: true },
      ],
    },
  ],
});

describe('energy: caps, blocking and time grants', () => {
  it('maxPoints cuts an award to fit', async () => {
    const t = setup(energyConfig);
    await t.engine.recordEvent('flashcards', { user: u, value: 2 }); // 5 - 2 = 3
    t.advance(3 * HOUR + 30 * 60_000);
    const r = await t.engine.accrue('u1');
    // Three hourly grants due; the third is cut from 1 to 0 and not recorded... the cap is 5: 3 -> 4 -> 5.
    expect(eachGrant(r.points.energy?.awards ?? []).map((a) => [a.awarded, a.total, a.date])).toEqual([
      [1, 4, '2026-01-05T11:00:00.000Z'],
      [1, 5, '2026-01-05T12:00:00.000Z'],
    ]);
  });

  it('at 0 energy a blocking trigger fails the whole event (422) and the metric total is unchanged', async () => {
    const t = setup(energyConfig);
    await t.engine.recordEvent('flashcards', { user: u, value: 5 });
    const before = await t.store.loadUser('u1');
    const error = await t.engine.recordEvent('flashcards', { user: u, value: 1 }).catch((e) => e);
    expect(error).toBeInstanceOf(InsufficientPointsError);
    expect(error.status).toBe(422);
    expect(error.message).toContain('energy');
    expect(await t.store.loadUser('u1')).toEqual(before);
    expect((await t.engine.getUserMetric('u1', 'flashcards')).current).toBe(5);
    // An event that would overdraw by more than what is left is refused too, even when some is left.
    t.advance(2 * HOUR);
    await expect(t.engine.recordEvent('flashcards', { user: u, value: 3 })).rejects.toBeInstanceOf(InsufficientPointsError);
    expect((await t.engine.recordEvent('flashcards', { user: u, value: 2 })).points.energy).toMatchObject({ total: 0 });
  });

  it('hourly grants after 2.5 hours idle: two grants dated when due, materialised by the next event', async () => {
    const t = setup(energyConfig);
    await t.engine.recordEvent('flashcards', { user: u, value: 5 });
    t.advance(2.5 * HOUR);
    expect((await t.engine.getPointsSummary('u1', 'energy')).total).toBe(2); // a read sees them lazily
    const r = await t.engine.recordEvent('flashcards', { user: u, value: 1 });
    expect(eachGrant(r.points.energy?.awards ?? []).map((a) => [a.trigger.type, a.awarded, a.total, a.date])).toEqual([
      ['time', 1, 1, '2026-01-05T11:00:00.000Z'],
      ['time', 1, 2, '2026-01-05T12:00:00.000Z'],
      ['metric', -1, 1, '2026-01-05T12:30:00.000Z'],
    ]);
    expect(r.points.energy?.awards[0]?.trigger).toEqual({ id: energyConfig.pointsSystems[0]?.triggers[1]?.id, type: 'time', points: 1, timeUnit: 'hour', timeInterval: 1 });
  });

  it('daily grants land at local midnight, across a DST change', async () => {
    const cfg = defineConfig({
      metrics: [{ key: 'm', name: 'M' }],
      pointsSystems: [{ key: 'lives', name: 'Lives', maxPoints: 10, triggers: [{ key: 'daily-life', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 }] }],
    });
    const t = setup(cfg, '2024-03-29T12:00:00Z');
    await t.engine.identifyUser({ id: 'b', tz: 'Europe/Berlin' });
    t.set('2024-04-01T12:00:00Z');
    const r = await t.engine.accrue('b');
    expect(eachGrant(r.points.lives?.awards ?? []).map((a) => a.date)).toEqual([
      '2024-03-29T23:00:00.000Z', // 2024-03-30 00:00 CET
      '2024-03-30T23:00:00.000Z', // 2024-03-31 00:00 CET (the 23-hour day)
      '2024-03-31T22:00:00.000Z', // 2024-04-01 00:00 CEST
    ]);
  });

  it('a full tank idle for a year costs no awards and leaves the grants settled', async () => {
    const t = setup(energyConfig);
    await t.engine.identifyUser(u);
    t.advance(365 * DAY);
    expect((await t.engine.accrue('u1')).points).toEqual({});
    const r = await t.engine.recordEvent('flashcards', { user: u, value: 1 });
    expect(r.points.energy?.awards.map((a) => a.awarded)).toEqual([-1]);
  });

  it('simulateEvent returns what recordEvent would, committing nothing', async () => {
    const t = setup(energyConfig);
    await t.engine.recordEvent('flashcards', { user: u, value: 4 });
    t.advance(HOUR);
    const before = await t.store.loadUser('u1');
    const simulated = await t.engine.simulateEvent('flashcards', { user: u, value: 2 });
    expect(await t.store.loadUser('u1')).toEqual(before);
    const recorded = await t.engine.recordEvent('flashcards', { user: u, value: 2 });
    const strip = (r: typeof recorded) => ({ ...r, eventId: '', points: Object.fromEntries(Object.entries(r.points).map(([k, p]) => [k, { ...p, awards: p.awards.map((a) => ({ ...a, id: '' })) }])) });
    expect(strip(simulated)).toEqual(strip(recorded));
    await expect(t.engine.simulateEvent('flashcards', { user: u, value: 5 })).rejects.toBeInstanceOf(InsufficientPointsError);
  });
});

describe('boosts', () => {
  const cfg = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    attributes: [{ key: 'plan', name: 'Plan', type: 'user' }],
    pointsSystems: [
      {
        key: 'xp',
        name: 'XP',
        triggers: [{ key: 'per-m', type: 'metric', metricKey: 'm', metricThreshold: 1, points: 5 }],
        boosts: [
          { key: 'weekend', name: 'Double weekend', multiplier: 2, start: '2026-01-03', end: '2026-01-04', rounding: 'down' },
          { key: 'pro', name: 'Pro bonus', multiplier: 1.25, start: '2026-01-01', end: null, rounding: 'down', userAttributes: { plan: 'pro' } },
          { key: 'odd', name: 'Odd', multiplier: 1.1, start: '2026-02-01', end: '2026-02-01', rounding: 'up' },
        ],
      },
    ],
  });

  it('boosts apply while active in the user\'s zone, stack by multiplying, round as configured, and are listed', async () => {
    const t = setup(cfg, '2026-01-02T23:30:00Z'); // Friday in UTC, Saturday in Tokyo
    const utc = await t.engine.recordEvent('m', { user: { id: 'utc' }, value: 1 });
    expect(utc.points.xp?.awards[0]).toMatchObject({ awarded: 5 });
    expect(utc.points.xp?.awards[0]).not.toHaveProperty('boosts');
    const tokyo = await t.engine.recordEvent('m', { user: { id: 'tokyo', tz: 'Asia/Tokyo' }, value: 1 });
    expect(tokyo.points.xp?.awards[0]).toMatchObject({ awarded: 10, boosts: [{ key: 'weekend', multiplier: 2 }] });
    const pro = await t.engine.recordEvent('m', { user: { id: 'pro', tz: 'Asia/Tokyo', attributes: { plan: 'pro' } }, value: 1 });
    // 5 x 2 x 1.25 = 12.5, rounded down to 12.
    expect(pro.points.xp?.awards[0]).toMatchObject({ awarded: 12, boosts: [{ key: 'weekend' }, { key: 'pro' }] });
    t.set('2026-02-01T12:00:00Z');
    // 5 x 1.1 = 5.5, rounded up to 6.
    expect((await t.engine.recordEvent('m', { user: { id: 'utc' }, value: 1 })).points.xp?.awards[0]).toMatchObject({ awarded: 6 });
  });
});

describe('reads', () => {
  it('getPointsSummary: awards 1..100 (default 10), newest first; bad values are validation errors', async () => {
    const t = setup(xpConfig);
    for (let i = 0; i < 15; i++) await t.engine.recordEvent('lessons', { user: u, value: 5 });
    const s = await t.engine.getPointsSummary('u1', 'xp');
    expect(s.awards).toHaveLength(10);
    expect(s.awards[0]?.total).toBe(155);
    expect(s.total).toBe(155);
    expect(s.level?.key).toBe('silver');
    expect((await t.engine.getPointsSummary('u1', 'xp', { awards: 100 })).awards).toHaveLength(16);
    for (const bad of [0, 101, 2.5, Number.NaN]) await expect(t.engine.getPointsSummary('u1', 'xp', { awards: bad })).rejects.toMatchObject({ code: 'VALIDATION', status: 400 });
    await expect(t.engine.getPointsSummary('ghost', 'xp')).rejects.toMatchObject({ status: 404 });
    await expect(t.engine.getPointsSummary('u1', 'nope' as 'xp')).rejects.toMatchObject({ status: 404 });
  });

  it('event summaries: every period present, keyed by its first date, total at the end and net change', async () => {
    const t = setup(xpConfig, '2026-01-05T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u1', tz: 'America/New_York' }, value: 5 });
    t.advance(2 * DAY);
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: 10 });
    await t.engine.recordEvent('lessons', { user: { id: 'u1' }, value: -3 });
    const daily = await t.engine.getMetricEventSummary('u1', 'lessons', { aggregation: 'daily', startDate: '2026-01-04', endDate: '2026-01-08' });
    expect(daily).toEqual([
      { date: '2026-01-04', total: 0, change: 0 },
      { date: '2026-01-05', total: 5, change: 5 },
      { date: '2026-01-06', total: 5, change: 0 },
      { date: '2026-01-07', total: 12, change: 7 },
      { date: '2026-01-08', total: 12, change: 0 },
    ]);
    const weekly = await t.engine.getPointsEventSummary('u1', 'xp', { aggregation: 'weekly', startDate: '2026-01-01', endDate: '2026-01-14' });
    expect(weekly).toEqual([
      { date: '2025-12-29', total: 0, change: 0 },
      { date: '2026-01-05', total: 35, change: 35 }, // 5 created + 10 + 20; the streak broke on the 6th
      { date: '2026-01-12', total: 35, change: 0 },
    ]);
    const monthly = await t.engine.getMetricEventSummary('u1', 'lessons', { aggregation: 'monthly', startDate: '2025-12-15', endDate: '2026-02-01' });
    expect(monthly.map((m) => m.date)).toEqual(['2025-12-01', '2026-01-01', '2026-02-01']);
  });

  it('event summaries validate aggregation and dates (start <= end, at most 400 days)', async () => {
    const t = setup(xpConfig);
    await t.engine.recordEvent('lessons', { user: u, value: 1 });
    const bad = [
      { aggregation: 'hourly', startDate: '2026-01-01', endDate: '2026-01-02' },
      { aggregation: 'daily', startDate: '2026-01-05', endDate: '2026-01-01' },
      { aggregation: 'daily', startDate: '2026-01-01', endDate: '2027-02-06' },
      { aggregation: 'daily', startDate: '2026-02-30', endDate: '2026-03-01' },
    ];
    for (const opts of bad) await expect(t.engine.getMetricEventSummary('u1', 'lessons', opts as never)).rejects.toMatchObject({ status: 400 });
    expect(await t.engine.getMetricEventSummary('u1', 'lessons', { aggregation: 'daily', startDate: '2026-01-01', endDate: '2027-02-05' })).toHaveLength(401);
  });

  it('level summary and histogram count users across the system', async () => {
    const t = setup(xpConfig);
    for (const [id, lessons] of [['a', 0], ['b', 50], ['c', 100], ['d', 500]] as const) await t.engine.recordEvent('lessons', { user: { id }, value: lessons });
    // Totals: a 5, b 105, c 205, d 1005.
    expect((await t.engine.getLevelSummary('xp')).map((l) => [l.level.key, l.users])).toEqual([['bronze', 1], ['silver', 1], ['gold', 2]]);
    const histogram = await t.engine.getPointsHistogram('xp');
    expect(histogram).toHaveLength(11);
    // The service's buckets: 0-0, then ten ranges up to 1005 rounded up to a power of ten (parity.points.test.ts).
    expect(histogram[0]).toEqual({ from: 0, to: 0, users: 0 });
    expect(histogram[1]).toEqual({ from: 1, to: 1000, users: 3 });
    expect(histogram[2]).toEqual({ from: 1001, to: 2000, users: 1 });
    expect(histogram.reduce((s, b) => s + b.users, 0)).toBe(4);
    expect(histogram[10]).toEqual({ from: 9001, to: 10000, users: 0 });
    const system = await t.engine.getPointsSystem('xp');
    expect(system.triggers).toHaveLength(5);
  });
});

describe('awards handed out by the core', () => {
  it('a result that awarded nothing hands out a map of its own: writing to it changes no later call', async () => {
    const { applyEvent, viewState } = await import('../src/index.js');
    const cfg = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }] });
    const ctx = (n: number) => ({ now: new Date('2026-01-05T10:00:00Z'), newId: () => `id-${n}-${Math.random()}` });
    const { state } = applyEvent(cfg, null, { metricKey: 'lessons', user: { id: 'a' }, value: 0 }, ctx(1));
    const view = viewState(cfg, state, ctx(2));
    expect(view.awards.size).toBe(0);
    // The caller's map: theirs to change.
    view.awards.set('xp', []);
    const b = applyEvent(cfg, null, { metricKey: 'lessons', user: { id: 'b' }, value: 1 }, ctx(3));
    const c = applyEvent(cfg, null, { metricKey: 'lessons', user: { id: 'c' }, value: 1 }, ctx(4));
    expect(b.response.points.xp?.added).toBe(10);
    expect(c.response.points.xp?.added).toBe(10);
    expect(c.response.points.xp?.awards).toHaveLength(1);
    expect(viewState(cfg, c.state, ctx(5)).awards.size).toBe(0);
  });
});
