/**
 * Issue 13: getWrapped (the year in review in the hosted service's `WrappedResponse` shape), on the memory
 * store and PostgreSQL. Answers are validated against the OpenAPI schema of the hosted service.
 */
import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect, it } from 'vitest';
import { applyEvent, defineConfig, yearlyIndex, type LedgerQuery, type WrappedActivityPeriod } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { nextUp, percentChange } from '../src/engine/wrapped.js';
import { onEachStore, setupOn } from './stores.js';

const spec = JSON.parse(readFileSync(new URL('./fixtures/openapi/application.json', import.meta.url), 'utf8')) as Record<string, unknown>;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, 'application.json');
const schema = (name: string) => {
  const validate = ajv.getSchema(`application.json#/components/schemas/${name}`);
  if (!validate) throw new Error(`no schema ${name}`);
  return (value: unknown) => {
    const ok = validate(value);
    return ok ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  };
};
const validActivity = schema('WrappedActivity');
const validResponse = schema('WrappedResponse');

const NY = 'America/New_York';

const config = defineConfig({
  metrics: [
    { key: 'lessons', name: 'Lessons' },
    { key: 'words', name: 'Words' },
  ],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }],
  achievements: [
    { key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'ten', name: 'Ten', trigger: 'metric', metricKey: 'lessons', metricValue: 10 },
  ],
  streak: { frequency: 'daily' },
  pointsSystems: [
    { key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] },
    { key: 'energy', name: 'Energy', description: 'Refills daily', triggers: [{ key: 'daily', type: 'time', timeUnit: 'day', timeInterval: 1, points: 1 }] },
  ],
  leaderboards: [
    { key: 'weekly', name: 'Weekly lessons', rankBy: 'metric', metricKey: 'lessons', start: '2025-01-06', runUnit: 'day', runInterval: 7, timeZone: NY },
    { key: 'xp', name: 'XP', rankBy: 'points', pointsSystemKey: 'xp', start: '2024-01-01', timeZone: 'UTC' },
  ],
});

type Setup = Awaited<ReturnType<typeof setupOn<typeof config>>>;

/** u1 in New York: a lesson in 2024, then a year 2025 with events near local midnight, then one in 2026. */
async function story(t: Setup) {
  const at = async (iso: string, metric: 'lessons' | 'words', id: string, value: number, attributes?: Record<string, string>) => {
    t.set(iso);
    await t.engine.recordEvent(metric, { user: { id, tz: NY }, value, ...(attributes ? { attributes } : {}) });
  };
  await at('2024-12-20T12:00:00Z', 'lessons', 'u1', 2);
  // Idle until 2025-01-09 23:30 local (04:30 UTC on the 10th): a run of daily energy grants crosses New Year.
  await at('2025-01-10T04:30:00Z', 'lessons', 'u1', 3, { device: 'ios' });
  await at('2025-01-10T05:30:00Z', 'lessons', 'u1', 1, { device: 'web' }); // 00:30 local on the 10th
  await at('2025-03-12T15:00:00Z', 'lessons', 'u2', 20);
  await at('2025-03-14T15:00:00Z', 'lessons', 'u1', 5);
  await at('2025-03-14T16:00:00Z', 'words', 'u1', 100);
  await at('2025-03-15T15:00:00Z', 'lessons', 'u1', 2);
  await at('2025-03-16T15:00:00Z', 'lessons', 'u1', 1);
  await at('2025-06-02T15:00:00Z', 'lessons', 'u3', 5);
  await at('2025-08-04T15:00:00Z', 'lessons', 'u4', 17);
  await at('2025-12-31T04:59:00Z', 'lessons', 'u1', 1); // 2025-12-30 23:59 local
  await at('2026-01-01T04:30:00Z', 'lessons', 'u1', 4); // 2025-12-31 23:30 local: still 2025 in New York
  await at('2026-01-01T05:30:00Z', 'lessons', 'u1', 7); // 2026-01-01 00:30 local
  t.set('2026-02-01T12:00:00Z');
}

const keys = (p: WrappedActivityPeriod) => p.achievements.map((a) => a.key);

onEachStore('getWrapped', (kind) => {
  it('counts active days, weeks and months and finds the most active ones in the user\'s zone', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const w = await t.engine.getWrapped('u1', { year: 2025 });
    const a = w.activity;
    // Local days 01-09, 01-10, 03-14, 03-15, 03-16, 12-30, 12-31 (the 2026-01-01 04:30Z event is 2025-12-31 in New York).
    expect([a.daysActive, a.weeksActive, a.monthsActive]).toEqual([7, 3, 3]);
    expect(a.mostActiveDay.date).toBe('2025-03-14'); // 5 lessons + 100 words
    expect([a.mostActiveWeek.start, a.mostActiveWeek.end]).toEqual(['2025-03-10', '2025-03-16']);
    expect(a.mostActiveMonth.month).toBe(2);
    expect(w.user).toMatchObject({ id: 'u1', tz: NY, control: false });
    expect(validActivity(a)).toEqual([]);
    // The schema check is not vacuous.
    expect(validActivity({ ...a, mostActiveMonth: { ...a.mostActiveMonth, month: 12 } })).not.toEqual([]);
    expect(validActivity({ ...a, entireYear: { ...a.entireYear, leaderboards: { weekly: { ...a.entireYear.leaderboards.weekly, status: undefined } } } })).not.toEqual([]);
  });

  it('answers per-metric changes, percent changes and attribute breakdowns from the ledger of the year', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const a = (await t.engine.getWrapped('u1', { year: 2025 })).activity;
    const lessons = a.entireYear.metrics.lessons;
    // 3 + 1 + 5 + 2 + 1 + 1 + 4 in 2025, 2 before it, 7 after it.
    expect(lessons).toMatchObject({ name: 'Lessons', units: null, currentTotal: 26, changeThisPeriod: 17, percentChange: 850 });
    expect(lessons?.byAttribute).toEqual({
      device: {
        ios: { name: 'Lessons', units: null, currentTotal: 3, changeThisPeriod: 3, percentChange: 100 },
        web: { name: 'Lessons', units: null, currentTotal: 1, changeThisPeriod: 1, percentChange: 100 },
      },
    });
    expect(a.entireYear.metrics.words).toMatchObject({ currentTotal: 100, changeThisPeriod: 100, percentChange: 100, byAttribute: {} });
    // The most active day: 5 lessons on a total of 6 at its start.
    expect(a.mostActiveDay.metrics.lessons).toMatchObject({ changeThisPeriod: 5, percentChange: 83.33, byAttribute: {} });
    expect(a.mostActiveWeek.metrics.lessons).toMatchObject({ changeThisPeriod: 8, percentChange: 133.33 });
    expect(a.mostActiveMonth.metrics.words).toMatchObject({ changeThisPeriod: 100, percentChange: 100 });
    // Percentiles only for the entire year.
    expect(a.mostActiveDay.metrics.lessons?.percentileThisPeriod).toBeUndefined();
    expect(a.mostActiveWeek.metrics.lessons?.percentileThisPeriod).toBeUndefined();
    expect(a.mostActiveMonth.points.xp?.percentileThisPeriod).toBeUndefined();
  });

  it('answers per-points-system changes, a run of time grants across the year start split between the years', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const a = (await t.engine.getWrapped('u1', { year: 2025 })).activity;
    expect(a.entireYear.points.xp).toMatchObject({ name: 'XP', description: null, currentTotal: 260, changeThisPeriod: 170, percentChange: 850 });
    // One energy grant at the start of each local day: 11 in 2024 (Dec 21..31), 365 in 2025, 32 in 2026 by Feb 1.
    expect(a.entireYear.points.energy).toMatchObject({ name: 'Energy', description: 'Refills daily', currentTotal: 11 + 365 + 32, changeThisPeriod: 365, percentChange: 3318.18 });
    expect(a.mostActiveDay.points.energy).toMatchObject({ changeThisPeriod: 1 });
    expect(a.mostActiveMonth.points.energy).toMatchObject({ changeThisPeriod: 31 });
    // The yearly index holds the same change, the 2024 part of the run kept in 2024.
    expect(await t.store.getEntry(yearlyIndex('points', 'energy', 2025), 'u1')).toMatchObject({ value: 365 });
    expect(await t.store.getEntry(yearlyIndex('points', 'energy', 2024), 'u1')).toMatchObject({ value: 11 });
    expect(await t.store.getEntry(yearlyIndex('metric', 'lessons', 2025), 'u1')).toMatchObject({ value: 17 });
    expect(await t.store.getEntry(yearlyIndex('metric', 'lessons', 2026), 'u1')).toMatchObject({ value: 7 });
  });

  it('ranks the user\'s yearly change among the users who changed that year (percentiles)', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    // u5 took lessons only in 2024: not among 2025's users.
    t.set('2024-12-21T12:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u5' }, value: 50 });
    t.set('2026-02-01T12:00:00Z');
    expect(await t.store.countEntries(yearlyIndex('metric', 'lessons', 2025))).toBe(4);
    const percentile = async (id: string) => (await t.engine.getWrapped(id, { year: 2025 })).activity.entireYear.metrics.lessons?.percentileThisPeriod;
    // Changes in 2025: u1 17, u2 20, u3 5, u4 17. Share of users at or below the user's change, the user included.
    expect(await percentile('u1')).toBe(75);
    expect(await percentile('u2')).toBe(100);
    expect(await percentile('u3')).toBe(25);
    expect(await percentile('u4')).toBe(75);
    // u5, no lesson in 2025, against the four who had some.
    expect(await percentile('u5')).toBe(20);
    const words = (await t.engine.getWrapped('u1', { year: 2025 })).activity.entireYear;
    // Nobody else wrote words in 2025: no percentile.
    expect(words.metrics.words?.percentileThisPeriod).toBeUndefined();
    expect(words.points.xp?.percentileThisPeriod).toBe(75);
  });

  it('lists the achievements of the year only, in each period they fall in', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const a = (await t.engine.getWrapped('u1', { year: 2025 })).activity;
    expect(keys(a.entireYear)).toEqual(['ten']); // 'first' was reached in 2024
    expect(a.entireYear.achievements[0]?.achievedAt).toBe('2025-03-14T15:00:00.000Z');
    expect([keys(a.mostActiveDay), keys(a.mostActiveWeek), keys(a.mostActiveMonth)]).toEqual([['ten'], ['ten'], ['ten']]);
    expect(keys((await t.engine.getWrapped('u1', { year: 2024 })).activity.entireYear)).toEqual(['first']);
  });

  it('finds the longest streak of the year, clipped to its periods', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const a = (await t.engine.getWrapped('u1', { year: 2025 })).activity;
    expect(a.entireYear.longestStreak).toEqual({ length: 3, frequency: 'daily', periodStart: '2025-03-14', periodEnd: '2025-03-16', started: '2025-03-14' });
    // The streak of 2025-12-30 .. 2026-01-01 counts its 2026 day in 2026 only.
    const next = (await t.engine.getWrapped('u1', { year: 2026 })).activity;
    expect(next.entireYear.longestStreak).toEqual({ length: 1, frequency: 'daily', periodStart: '2026-01-01', periodEnd: '2026-01-01', started: '2026-01-01' });
  });

  it('answers the best rank per board in each period, from the rank history of the year\'s runs', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const a = (await t.engine.getWrapped('u1', { year: 2025 })).activity;
    // Alone in the week of 2025-01-06; second behind u2 in the week of 2025-03-10.
    expect(a.entireYear.leaderboards.weekly).toMatchObject({ key: 'weekly', rankBy: 'metric', status: 'finished', start: '2025-01-06', end: '2025-01-12', rank: 1, value: 3, breakdownAttribute: null });
    expect(a.mostActiveWeek.leaderboards.weekly).toMatchObject({ start: '2025-03-10', end: '2025-03-16', rank: 2, value: 5 });
    expect(a.mostActiveDay.leaderboards.weekly).toMatchObject({ rank: 2, value: 5 });
    expect(a.mostActiveDay.leaderboards.xp).toMatchObject({ status: 'active', start: '2024-01-01', end: null, rank: 2, value: 110 });
    expect(a.entireYear.leaderboards.xp).toMatchObject({ rank: 1 });
    // u3 ranked only in June: nothing in the periods of u3's year without a rank.
    const u3 = (await t.engine.getWrapped('u3', { year: 2025 })).activity;
    expect(Object.keys(u3.entireYear.leaderboards).sort()).toEqual(['weekly', 'xp']);
    expect(Object.keys((await t.engine.getWrapped('u1', { year: 2024 })).activity.entireYear.leaderboards)).toEqual(['xp']);
  });

  it('answers for boards with an end: one that does not repeat, and a weekly one whose end cuts its last run short', async () => {
    // Both used to loop for ever (the run after the last one was that run again) until the process ran out
    // of memory, found by a widened store differential.
    const ending = defineConfig({
      metrics: [{ key: 'lessons', name: 'Lessons' }],
      leaderboards: [
        { key: 'once', name: 'Once', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-03', end: '2026-01-20', timeZone: 'UTC' },
        { key: 'weeks', name: 'Weeks', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-05', end: '2026-01-20', runUnit: 'day', runInterval: 7, timeZone: 'UTC' },
      ],
    });
    const t = await setupOn(kind, ending, '2026-01-19T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'a' }, value: 2 });
    t.set('2026-01-20T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'b' }, value: 9 });
    for (const now of ['2026-01-20T11:00:00Z', '2026-02-10T00:00:00Z']) {
      t.set(now);
      const boards = (await t.engine.getWrapped('a', { year: 2026 })).activity.entireYear.leaderboards;
      expect(boards.once, now).toMatchObject({ start: '2026-01-03', end: '2026-01-20', rank: 1, value: 2 });
      // The week of 2026-01-19 ends with the board on the 20th; on the 19th a ranked first with 2 (b came later).
      expect(boards.weeks, now).toMatchObject({ start: '2026-01-19', end: '2026-01-20', rank: 1, value: 2 });
    }
  });

  it('answers an empty year with zero counts, the year\'s first day, week and month, and no streak', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const w = await t.engine.getWrapped('u1', { year: 2023 });
    const a = w.activity;
    expect([a.daysActive, a.weeksActive, a.monthsActive]).toEqual([0, 0, 0]);
    expect(a.mostActiveDay.date).toBe('2023-01-01');
    expect([a.mostActiveWeek.start, a.mostActiveWeek.end]).toEqual(['2022-12-26', '2023-01-01']);
    expect(a.mostActiveMonth.month).toBe(0);
    expect(a.entireYear.metrics.lessons).toEqual({ name: 'Lessons', units: null, currentTotal: 26, changeThisPeriod: 0, percentChange: 0, byAttribute: {} });
    expect(a.entireYear.points.energy).toMatchObject({ changeThisPeriod: 0, percentChange: 0 });
    expect(a.entireYear.achievements).toEqual([]);
    expect(a.entireYear.leaderboards).toEqual({});
    expect(a.entireYear.longestStreak).toEqual({ length: 0, frequency: 'daily', periodStart: null, periodEnd: null, started: null });
    expect(validActivity(a)).toEqual([]);
    // The first supported year.
    expect((await t.engine.getWrapped('u1', { year: 1900 })).activity.mostActiveDay.date).toBe('1900-01-01');
    // Without a streak in the configuration: a daily streak of 0.
    const bare = await setupOn(kind, defineConfig({ metrics: [{ key: 'm', name: 'M' }] }), '2026-03-01T10:00:00Z');
    await bare.engine.recordEvent('m', { user: { id: 'x' }, value: 1 });
    const b = (await bare.engine.getWrapped('x')).activity;
    expect(b.entireYear.longestStreak).toEqual({ length: 0, frequency: 'daily', periodStart: null, periodEnd: null, started: null });
    expect([b.daysActive, b.mostActiveDay.date]).toEqual([1, '2026-03-01']);
    expect(validActivity(b)).toEqual([]);
  });

  it('defaults to the current year in the user\'s zone and refuses bad input', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const now = await t.engine.getWrapped('u1');
    expect(now.activity.mostActiveDay.date).toBe('2026-01-01');
    expect(now.activity.entireYear.metrics.lessons?.changeThisPeriod).toBe(7);
    for (const year of [2027, 1899, 0, -1, 2025.5, Number.NaN, '2025', null]) {
      await expect(t.engine.getWrapped('u1', { year: year as number })).rejects.toMatchObject({ code: 'VALIDATION' });
    }
    await expect(t.engine.getWrapped('nobody', { year: 2025 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(t.engine.getWrapped('', { year: 2025 })).rejects.toMatchObject({ code: 'VALIDATION' });
    // The current year begins in the user's zone: on 2026-12-31 at 20:00 in New York (UTC already 2027), 2027 is refused.
    t.set('2027-01-01T01:00:00Z');
    await expect(t.engine.getWrapped('u1', { year: 2027 })).rejects.toMatchObject({ code: 'VALIDATION' });
    expect((await t.engine.getWrapped('u1')).activity.mostActiveDay.date).toBe('2026-01-01');
  });

  it('reads the ledger of the year only (bounded range reads)', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const queries: LedgerQuery[] = [];
    const readLedger = t.store.readLedger.bind(t.store);
    t.store.readLedger = (q: LedgerQuery) => {
      queries.push(q);
      return readLedger(q);
    };
    const readUserLedger = t.store.readUserLedger.bind(t.store);
    let whole = 0;
    t.store.readUserLedger = (userId, page) => {
      whole += 1;
      return readUserLedger(userId, page);
    };
    await t.engine.getWrapped('u1', { year: 2025 });
    expect(whole).toBe(0);
    expect(queries.length).toBeGreaterThan(0);
    for (const q of queries) {
      // Either a range inside the year (with a few days of slack) or the one row before it.
      if (q.from === undefined) expect(q).toMatchObject({ order: 'desc', limit: 1 });
      else {
        expect(q.from >= '2024-12-28').toBe(true);
        expect(q.to !== undefined && q.to <= '2026-01-06').toBe(true);
      }
    }
  });

  it('serves GET /users/{id}/wrapped in the hosted shape (validated against the OpenAPI schema)', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const get = (path: string) => handler(new Request(`http://x/v1${path}`, { headers: { 'x-api-key': 'k' } }));
    for (const year of [2025, 2023]) {
      const res = await get(`/users/u1/wrapped?year=${year}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { user: Record<string, unknown>; activity: { entireYear: { achievements: Record<string, unknown>[] } } };
      expect(validResponse(body)).toEqual([]);
      expect(body.user).toMatchObject({ id: 'u1', subscribeToEmails: true, deviceTokens: [] });
      if (year === 2025) expect(body.activity.entireYear.achievements[0]).toMatchObject({ key: 'ten', completions: 3, rarity: 75 });
    }
    const current = await get('/users/u1/wrapped');
    expect(current.status).toBe(200);
    expect(validResponse(await current.json())).toEqual([]);
    // GET /users/{id}/wrapped documents 422 (not 400) for a bad request.
    expect((await get('/users/u1/wrapped?year=2099')).status).toBe(422);
    expect((await get('/users/u1/wrapped?year=abc')).status).toBe(422);
    expect((await get('/users/nobody/wrapped?year=2025')).status).toBe(404);
  });

  it('fills the yearly index of a user written before Wrapped on replay', async () => {
    const t = await setupOn(kind, config, '2024-12-20T12:00:00Z');
    await story(t);
    // u1 as written before Wrapped: no yearly sums in the state, no entries in the yearly indexes.
    const loaded = await t.store.loadUser('u1');
    if (!loaded) throw new Error('no u1');
    const { yearly: _dropped, ...old } = loaded.state;
    const date = '2026-02-01';
    await t.store.commit({
      userId: 'u1',
      expectedVersion: loaded.version,
      state: old,
      ledger: [],
      leaderboard: [
        { index: yearlyIndex('metric', 'lessons', 2026), userId: 'u1', remove: true, date, unranked: true },
        { index: yearlyIndex('points', 'energy', 2026), userId: 'u1', remove: true, date, unranked: true },
        { index: yearlyIndex('points', 'xp', 2026), userId: 'u1', remove: true, date, unranked: true },
      ],
      counters: {},
      idempotency: null,
    });
    expect(await t.store.getEntry(yearlyIndex('metric', 'lessons', 2026), 'u1')).toBeNull();
    const report = await t.engine.replay({ users: ['u1'] });
    expect(report.failures).toEqual([]);
    expect(await t.store.getEntry(yearlyIndex('metric', 'lessons', 2026), 'u1')).toMatchObject({ value: 7 });
    expect(await t.store.getEntry(yearlyIndex('points', 'xp', 2026), 'u1')).toMatchObject({ value: 70 });
    expect(await t.store.getEntry(yearlyIndex('points', 'energy', 2026), 'u1')).toMatchObject({ value: 1 });
    expect((await t.store.loadUser('u1'))?.state.yearly).toEqual({ year: 2026, metrics: { lessons: 7 }, points: { xp: 70, energy: 1 } });
    // A second replay finds nothing to write.
    const version = (await t.store.loadUser('u1'))?.version;
    await t.engine.replay({ users: ['u1'] });
    expect((await t.store.loadUser('u1'))?.version).toBe(version);
  });
});

it('writes one yearly index entry per metric the event touched and per points system it moved', () => {
  const ctx = (iso: string) => ({ now: new Date(iso), newId: (() => { let n = 0; return () => `id${++n}`; })() });
  const first = applyEvent(config, null, { metricKey: 'lessons', user: { id: 'p', tz: NY }, value: 2 }, ctx('2025-03-01T12:00:00Z'));
  const yearly = (e: { leaderboard: { index: string }[] }) => e.leaderboard.map((w) => ('value' in w ? [w.index, w.value] : [w.index])).filter(([i]) => String(i).startsWith('wy|'));
  expect(yearly(first.effects)).toEqual([['wy|m|lessons|2025', 2], ['wy|p|xp|2025', 20]]);
  expect(first.state.yearly).toEqual({ year: 2025, metrics: { lessons: 2 }, points: { xp: 20 } });
  // Words move no points: one write. A day later, the energy grant of the day moves energy too.
  const words = applyEvent(config, first.state, { metricKey: 'words', user: { id: 'p' }, value: 5 }, ctx('2025-03-02T12:00:00Z'));
  expect(yearly(words.effects)).toEqual([['wy|p|energy|2025', 1], ['wy|m|words|2025', 5]]);
  // The first event of a new local year starts the year's sums; the state keeps that year only.
  const next = applyEvent(config, words.state, { metricKey: 'lessons', user: { id: 'p' }, value: 1 }, ctx('2026-01-01T05:30:00Z'));
  expect(next.state.yearly?.year).toBe(2026);
  expect(next.state.yearly?.metrics).toEqual({ lessons: 1 });
  // The run of grants from 03-03 to 2026-01-01 is split: 304 to 2025 (305 with the first), 1 to 2026.
  expect(yearly(next.effects)).toContainEqual(['wy|p|energy|2025', 305]);
  expect(next.state.yearly?.points).toEqual({ energy: 1, xp: 10 });
});

it('percent changes and the double after a value', () => {
  expect([percentChange(5, 0), percentChange(-5, 0), percentChange(0, 0), percentChange(1, 3), percentChange(-2, -4)]).toEqual([100, -100, 0, 33.33, -50]);
  for (const x of [0, 1, -1, 0.1, 1e300, -1e-300, 17]) {
    expect(nextUp(x) > x).toBe(true);
    expect((x + nextUp(x)) / 2 === x || (x + nextUp(x)) / 2 === nextUp(x)).toBe(true);
  }
});
