/**
 * Issue 14, leaderboards: the hosted service's documented rules (docs/rules.md section 7), one test per rule,
 * each on the memory store and PostgreSQL.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig, type ConfigInput } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { sequentialIds } from '../src/testing/index.js';
import { onEachStore, setupOn } from './stores.js';

type Boards = NonNullable<ConfigInput['leaderboards']>;

const base = {
  timeZone: 'UTC',
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  attributes: [{ key: 'country', name: 'Country', type: 'user' as const }],
} satisfies ConfigInput;

const daily = (key: string, extra: Partial<Boards[number]> = {}) => ({ key, name: key, rankBy: 'metric' as const, metricKey: 'lessons', start: '2026-03-01', runUnit: 'day' as const, ...extra }) as Boards[number];

const board = (boards: Boards, extra: Partial<ConfigInput> = {}) => defineConfig({ ...base, ...extra, leaderboards: boards } as ConfigInput);

const TOKYO = { id: 'tokyo', tz: 'Asia/Tokyo' };
const LA = { id: 'la', tz: 'America/Los_Angeles' };

const ranking = (page: { rankings: { userId: string; rank: number; value: number }[] }) => page.rankings.map((r) => [r.userId, r.rank, r.value]);

onEachStore('leaderboard runs follow each user\'s local calendar', (kind) => {
  it('a user\'s event counts in the run containing its local date in the user\'s zone (Tokyo and Los Angeles at one instant)', async () => {
    const config = board([daily('daily'), daily('weekly', { start: '2026-03-02', runInterval: 7 })]);
    // 2026-03-02T20:00Z is 03-03 05:00 in Tokyo and 03-02 12:00 in Los Angeles.
    const t = await setupOn(kind, config, '2026-03-02T20:00:00Z');
    const tokyo = await t.engine.recordEvent('lessons', { user: TOKYO, value: 3 });
    const la = await t.engine.recordEvent('lessons', { user: LA, value: 5 });
    expect(tokyo.leaderboards.daily).toMatchObject({ start: '2026-03-03', end: '2026-03-03', rank: 1, value: 3, timeZone: null });
    expect(la.leaderboards.daily).toMatchObject({ start: '2026-03-02', end: '2026-03-02', rank: 1, value: 5 });
    expect(ranking(await t.engine.getLeaderboard('daily', { run: '2026-03-03' }))).toEqual([['tokyo', 1, 3]]);
    expect(ranking(await t.engine.getLeaderboard('daily', { run: '2026-03-02' }))).toEqual([['la', 1, 5]]);
    // Rank histories are dated by the user's local date.
    expect((await t.engine.getUserLeaderboard('tokyo', 'daily')).history.map((h) => h.date)).toEqual(['2026-03-03']);
    expect((await t.engine.getUserLeaderboard('la', 'daily')).history.map((h) => h.date)).toEqual(['2026-03-02']);
    // Weekly runs (Mondays): Sunday 2026-03-08T20:00Z is already Monday 03-09 in Tokyo, still Sunday in LA.
    t.set('2026-03-08T20:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: TOKYO, value: 1 })).leaderboards.weekly).toMatchObject({ start: '2026-03-09', value: 1 });
    expect((await t.engine.recordEvent('lessons', { user: LA, value: 1 })).leaderboards.weekly).toMatchObject({ start: '2026-03-02', value: 6 });
    expect(ranking(await t.engine.getLeaderboard('weekly', { run: '2026-03-02' }))).toEqual([['la', 1, 6], ['tokyo', 2, 3]]);
    // Users of different zones in the same local run share one index.
    t.set('2026-03-09T20:00:00Z');
    await t.engine.recordEvent('lessons', { user: LA, value: 4 });
    expect(ranking(await t.engine.getLeaderboard('weekly', { run: '2026-03-10' }))).toEqual([['la', 1, 4], ['tokyo', 2, 1]]);
  });

  it('a board with an explicit timeZone keeps one zone for everyone', async () => {
    const config = board([daily('utc', { timeZone: 'UTC' })], { timeZone: 'Asia/Tokyo' });
    const t = await setupOn(kind, config, '2026-03-02T20:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: TOKYO, value: 3 })).leaderboards.utc).toMatchObject({ start: '2026-03-02', timeZone: 'UTC' });
    expect((await t.engine.recordEvent('lessons', { user: LA, value: 5 })).leaderboards.utc).toMatchObject({ start: '2026-03-02' });
    expect(ranking(await t.engine.getLeaderboard('utc'))).toEqual([['la', 1, 5], ['tokyo', 2, 3]]);
    expect((await t.engine.getUserLeaderboard('tokyo', 'utc')).run.start).toBe('2026-03-02');
    // Its run's status follows its own zone.
    t.set('2026-03-02T23:59:59Z');
    expect((await t.engine.getLeaderboard('utc', { run: '2026-03-02' })).status).toBe('active');
    t.set('2026-03-03T00:00:00Z');
    expect((await t.engine.getLeaderboard('utc', { run: '2026-03-02' })).status).toBe('finished');
  });

  it('a run is scheduled until its first date has begun in the earliest zone (UTC+14)', async () => {
    const config = board([daily('daily', { start: '2026-03-10', end: '2026-03-12' })]);
    // 2026-03-10 begins at UTC+14 on 2026-03-09T10:00Z.
    const t = await setupOn(kind, config, '2026-03-09T09:59:59Z');
    expect((await t.engine.getLeaderboard('daily', { run: '2026-03-10' })).status).toBe('scheduled');
    expect((await t.engine.listLeaderboards()).find((b) => b.key === 'daily')?.status).toBe('scheduled');
    t.set('2026-03-09T10:00:00Z');
    expect((await t.engine.getLeaderboard('daily', { run: '2026-03-10' })).status).toBe('active');
    expect((await t.engine.listLeaderboards()).find((b) => b.key === 'daily')?.status).toBe('active');
    // A user at UTC+14 already counts in it.
    const r = await t.engine.recordEvent('lessons', { user: { id: 'kiritimati', tz: 'Pacific/Kiritimati' }, value: 2 });
    expect(r.leaderboards.daily).toMatchObject({ start: '2026-03-10', rank: 1 });
    expect((await t.engine.getLeaderboard('daily', { run: '2026-03-11' })).status).toBe('scheduled');
  });

  it('a run is active until its last date has ended in every zone (UTC-12, 12 hours after its UTC end), then finished', async () => {
    const config = board([daily('daily', { start: '2026-03-10', end: '2026-03-12' })]);
    // 2026-03-10 ends at UTC-12 on 2026-03-11T12:00Z.
    const t = await setupOn(kind, config, '2026-03-11T11:30:00Z');
    const late = await t.engine.recordEvent('lessons', { user: { id: 'baker', tz: 'Etc/GMT+12' }, value: 4 });
    expect(late.leaderboards.daily).toMatchObject({ start: '2026-03-10', rank: 1 });
    t.set('2026-03-11T11:59:59.999Z');
    expect((await t.engine.getLeaderboard('daily', { run: '2026-03-10' })).status).toBe('active');
    t.set('2026-03-11T12:00:00Z');
    expect(await t.engine.getLeaderboard('daily', { run: '2026-03-10' })).toMatchObject({ status: 'finished', rankings: [{ userId: 'baker', value: 4 }] });
    // The board likewise: its end date 2026-03-12 ends everywhere on 2026-03-13T12:00Z.
    t.set('2026-03-13T11:59:59Z');
    expect((await t.engine.listLeaderboards()).find((b) => b.key === 'daily')?.status).toBe('active');
    t.set('2026-03-13T12:00:00Z');
    expect((await t.engine.listLeaderboards()).map((b) => b.key)).not.toContain('daily');
    expect((await t.engine.listLeaderboards({ includeFinished: true })).find((b) => b.key === 'daily')?.status).toBe('finished');
  });

  it('the current run: getLeaderboard reads today\'s run in the configuration\'s zone, getUserLeaderboard in the user\'s zone (Laurel)', async () => {
    const config = board([daily('daily')], { timeZone: 'America/New_York' });
    // 2026-03-03T03:00Z: 03-02 22:00 in New York, 03-03 12:00 in Tokyo, 03-02 19:00 in Los Angeles.
    const t = await setupOn(kind, config, '2026-03-03T03:00:00Z');
    await t.engine.recordEvent('lessons', { user: TOKYO, value: 1 });
    await t.engine.recordEvent('lessons', { user: LA, value: 2 });
    expect(await t.engine.getLeaderboard('daily')).toMatchObject({ run: { start: '2026-03-02' }, rankings: [{ userId: 'la' }] });
    expect(await t.engine.getUserLeaderboard('tokyo', 'daily')).toMatchObject({ run: { start: '2026-03-03' }, rank: 1, value: 1 });
    expect(await t.engine.getUserLeaderboard('la', 'daily')).toMatchObject({ run: { start: '2026-03-02' }, rank: 1, value: 2 });
  });

  it('a user who moves zone westwards adds to the earlier run their event falls in, never overwriting it', async () => {
    const config = board([daily('daily'), daily('weekly', { start: '2026-03-02', runInterval: 7 })]);
    // At UTC+14: 2026-03-02T09:00Z is 03-02 23:00 and 10:30Z is 03-03 00:30.
    const t = await setupOn(kind, config, '2026-03-02T09:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'mover', tz: 'Pacific/Kiritimati' }, value: 2 });
    await t.engine.recordEvent('lessons', { user: { id: 'other', tz: 'UTC' }, value: 5 });
    t.set('2026-03-02T10:30:00Z');
    expect((await t.engine.recordEvent('lessons', { user: { id: 'mover' }, value: 7 })).leaderboards.daily).toMatchObject({ start: '2026-03-03', value: 7 });
    // Moved to UTC-12: 11:00Z is 03-01 23:00 there (two days back), 13:00Z is 03-02 01:00.
    t.set('2026-03-02T11:00:00Z');
    const back2 = await t.engine.recordEvent('lessons', { user: { id: 'mover', tz: 'Etc/GMT+12' }, value: 3 });
    expect(back2.leaderboards.daily).toMatchObject({ start: '2026-03-01', value: 3, rank: 1 });
    t.set('2026-03-02T13:00:00Z');
    const back1 = await t.engine.recordEvent('lessons', { user: { id: 'mover' }, value: 4 });
    expect(back1.leaderboards.daily).toMatchObject({ start: '2026-03-02', value: 6, previousRank: 2, rank: 1 });
    expect(back1.leaderboards.weekly).toMatchObject({ start: '2026-03-02', value: 13 });
    expect(ranking(await t.engine.getLeaderboard('daily', { run: '2026-03-02' }))).toEqual([['mover', 1, 6], ['other', 2, 5]]);
    expect(ranking(await t.engine.getLeaderboard('daily', { run: '2026-03-03' }))).toEqual([['mover', 1, 7]]);
    expect(ranking(await t.engine.getLeaderboard('daily', { run: '2026-03-01' }))).toEqual([['mover', 1, 3]]);
    // Back in the latest run, the value there is intact.
    t.set('2026-03-03T13:00:00Z'); // 03-03 01:00 at UTC-12
    expect((await t.engine.recordEvent('lessons', { user: { id: 'mover' }, value: 1 })).leaderboards.daily).toMatchObject({ start: '2026-03-03', value: 8 });
    const kept = (await t.store.loadUser('mover'))?.state.leaderboards.daily;
    expect(kept?.earlier?.map((e) => [e.run, e.value])).toEqual([['2026-03-02', 6], ['2026-03-01', 3]]);
    // Runs that ended more than 2 days before the latest one began are no longer kept.
    t.set('2026-03-05T13:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'mover' }, value: 1 });
    expect((await t.store.loadUser('mover'))?.state.leaderboards.daily?.earlier?.map((e) => e.run)).toEqual(['2026-03-03']);
  });
});

onEachStore('leaderboard time restrictions', (kind) => {
  it('only activity at or after startTime and before endTime of the user\'s local day counts (metric boards; an explicit zone uses its own)', async () => {
    const config = board([daily('office', { startTime: '09:00', endTime: '17:00' }), daily('office-ny', { startTime: '09:00', endTime: '17:00', timeZone: 'America/New_York' })]);
    const t = await setupOn(kind, config, '2026-03-02T23:59:59Z'); // Tokyo 08:59:59, New York 18:59:59
    const at = async (iso: string) => {
      t.set(iso);
      return (await t.engine.recordEvent('lessons', { user: TOKYO, value: 1 })).leaderboards;
    };
    expect(await at('2026-03-02T23:59:59Z')).toEqual({});
    expect((await at('2026-03-03T00:00:00Z')).office).toMatchObject({ start: '2026-03-03', value: 1 }); // Tokyo 09:00
    expect((await at('2026-03-03T07:59:59Z')).office).toMatchObject({ value: 2 }); // Tokyo 16:59:59
    expect(await at('2026-03-03T08:00:00Z')).toEqual({}); // Tokyo 17:00
    const ny = await at('2026-03-03T14:00:00Z'); // Tokyo 23:00, New York 09:00
    expect(Object.keys(ny)).toEqual(['office-ny']);
    expect(ny['office-ny']).toMatchObject({ start: '2026-03-03', value: 1 });
    expect(ranking(await t.engine.getLeaderboard('office', { run: '2026-03-03' }))).toEqual([['tokyo', 1, 2]]);
    expect((await t.engine.listLeaderboards()).find((b) => b.key === 'office')).toMatchObject({ startTime: '09:00', endTime: '17:00' });
  });

  it('a startTime later than the endTime is an overnight window (Laurel); times may carry seconds', async () => {
    const config = board([daily('night', { startTime: '22:00', endTime: '02:00:30' }), daily('plain')]);
    const t = await setupOn(kind, config, '2026-03-02T21:59:59Z');
    const counted = async (iso: string) => {
      t.set(iso);
      return (await t.engine.recordEvent('lessons', { user: { id: 'owl' }, value: 1 })).leaderboards.night?.value ?? null;
    };
    expect(await counted('2026-03-02T21:59:59Z')).toBeNull();
    expect(await counted('2026-03-02T22:00:00Z')).toBe(1);
    expect(await counted('2026-03-02T23:59:59Z')).toBe(2);
    expect(await counted('2026-03-03T00:00:00Z')).toBe(1); // the next day's run
    expect(await counted('2026-03-03T02:00:29Z')).toBe(2);
    expect(await counted('2026-03-03T02:00:30Z')).toBeNull();
    expect(await counted('2026-03-03T12:00:00Z')).toBeNull();
    expect((await t.engine.getLeaderboard('plain', { run: '2026-03-03' })).rankings[0]?.value).toBe(4);
    expect((await t.engine.getLeaderboard('plain')).startTime).toBeNull();
  });

  it('points boards count each award at its dated instant, and of a run of time grants only those due inside the run and the window', async () => {
    const config = defineConfig({
      ...base,
      pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'hourly', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }] }],
      leaderboards: [{ key: 'morning', name: 'Morning', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-03-01', runUnit: 'day', startTime: '09:00', endTime: '12:00' }],
    });
    const t = await setupOn(kind, config, '2026-03-02T00:00:00Z');
    await t.engine.identifyUser({ id: 'u' });
    // At 23:30 the 23 hourly grants of 01:00..23:00 come as one run: those of 09:00, 10:00 and 11:00 count;
    // the lesson's award (23:30) does not.
    t.set('2026-03-02T23:30:00Z');
    const first = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(first.points.xp?.awards.find((a) => a.grants)?.grants?.count).toBe(23);
    expect(first.leaderboards.morning).toMatchObject({ start: '2026-03-02', value: 3 });
    // The next day at 10:00: grants of 00:00..10:00 (09:00 and 10:00 count) and the lesson's 10 points.
    t.set('2026-03-03T10:00:00Z');
    expect((await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 })).leaderboards.morning).toMatchObject({ start: '2026-03-03', value: 12 });
    expect(ranking(await t.engine.getLeaderboard('morning', { run: '2026-03-02' }))).toEqual([['u', 1, 3]]);
    expect(ranking(await t.engine.getLeaderboard('morning', { run: '2026-03-03' }))).toEqual([['u', 1, 12]]);
  });

  it('time restrictions must be HH:mm[:ss], differ from each other, and are refused on streak boards (Laurel)', async () => {
    await setupOn(kind, board([daily('ok', { startTime: '23:59:59', endTime: '00:00' })]));
    for (const bad of [{ startTime: '9:00' }, { endTime: '24:00' }, { startTime: '10:00', endTime: '10:00:00' }, { endTime: '00:00' }]) {
      expect(() => board([daily('b', bad)])).toThrow(expect.objectContaining({ code: 'CONFIG' }) as Error);
    }
    const streak = { metrics: base.metrics, streak: { frequency: 'daily' as const }, leaderboards: [{ key: 's', name: 'S', rankBy: 'streak' as const, start: '2026-03-01', startTime: '09:00' }] };
    expect(() => defineConfig(streak)).toThrow(/streak length/);
  });
});

onEachStore('inactive leaderboards', (kind) => {
  it('an inactive board is not tracked: events do not update it', async () => {
    const config = board([daily('on'), daily('off', { status: 'inactive' })]);
    const t = await setupOn(kind, config, '2026-03-02T10:00:00Z');
    const r = await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 3 });
    expect(Object.keys(r.leaderboards)).toEqual(['on']);
    expect(await t.engine.getLeaderboard('off')).toMatchObject({ status: 'inactive', rankings: [] });
    // Switched off later, a board keeps what it had and stops counting (Laurel).
    const on = createEngine({ config: board([daily('on'), daily('off')]), store: t.store, clock: () => t.now(), newId: sequentialIds('on-') });
    await on.recordEvent('lessons', { user: { id: 'u' }, value: 2 });
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 5 });
    expect(ranking(await t.engine.getLeaderboard('off'))).toEqual([['u', 1, 2]]);
    expect((await t.engine.getUserLeaderboard('u', 'off')).value).toBe(2);
  });

  it('an inactive board is listed only when asked; read by key it answers with status inactive', async () => {
    const config = board([daily('on'), daily('off', { status: 'inactive' })]);
    const t = await setupOn(kind, config, '2026-03-02T10:00:00Z');
    expect((await t.engine.listLeaderboards()).map((b) => b.key)).toEqual(['on']);
    expect((await t.engine.listLeaderboards({ includeInactive: true })).map((b) => [b.key, b.status])).toEqual([['on', 'active'], ['off', 'inactive']]);
    expect((await t.engine.getLeaderboard('off', { run: '2026-03-02' })).status).toBe('inactive');
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    const listed = async (query: string) => ((await (await handler(new Request(`http://x/v1/leaderboards${query}`, { headers: { 'x-api-key': 'k' } }))).json()) as { key: string }[]).map((b) => b.key);
    expect(await listed('')).toEqual(['on']);
    expect(await listed('?includeInactive=true')).toEqual(['on', 'off']);
  });
});

onEachStore('reading breakdown leaderboards', (kind) => {
  const config = board([daily('by-country', { breakdownAttributes: ['country'] }), daily('plain')]);
  const get = async (handler: (r: Request) => Promise<Response>, path: string) => (await handler(new Request(`http://x/v1/leaderboards/${path}`, { headers: { 'x-api-key': 'k' } }))).status;

  it('reading a breakdown board needs userAttributes (a userId reads that user\'s group: Laurel)', async () => {
    const t = await setupOn(kind, config, '2026-03-02T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'fr', attributes: { country: 'FR' } }, value: 2 });
    await t.engine.recordEvent('lessons', { user: { id: 'de', attributes: { country: 'DE' } }, value: 3 });
    await expect(t.engine.getLeaderboard('by-country')).rejects.toMatchObject({ code: 'VALIDATION', status: 400 });
    expect(ranking(await t.engine.getLeaderboard('by-country', { userAttributes: { country: 'FR' } }))).toEqual([['fr', 1, 2]]);
    expect(ranking(await t.engine.getLeaderboard('by-country', { userId: 'de' }))).toEqual([['de', 1, 3]]);
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    // GET /leaderboards/{key} documents 422 (not 400) for a bad request.
    expect(await get(handler, 'by-country')).toBe(422);
    expect(await get(handler, 'by-country?userAttributes=country:DE')).toBe(200);
  });

  it('userAttributes on a board without breakdowns is a validation error', async () => {
    const t = await setupOn(kind, config, '2026-03-02T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'fr', attributes: { country: 'FR' } }, value: 2 });
    await expect(t.engine.getLeaderboard('plain', { userAttributes: { country: 'FR' } })).rejects.toMatchObject({ code: 'VALIDATION', status: 400 });
    expect(ranking(await t.engine.getLeaderboard('plain'))).toEqual([['fr', 1, 2]]);
    const handler = createHttpHandler(t.engine, { apiKeys: ['k'] });
    expect(await get(handler, 'plain?userAttributes=country:FR')).toBe(422);
    expect(await get(handler, 'plain')).toBe(200);
  });
});

onEachStore('leaderboard supersets Laurel keeps', (kind) => {
  it('keep Laurel\'s: maxParticipants above 1 000', async () => {
    const t = await setupOn(kind, board([daily('big', { maxParticipants: 5000 })]), '2026-03-02T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    expect(await t.engine.getLeaderboard('big')).toMatchObject({ maxParticipants: 5000, rankings: [{ userId: 'u', rank: 1 }] });
  });

  it('keep Laurel\'s: a one-day summary range', async () => {
    const t = await setupOn(kind, board([daily('d')]), '2026-03-02T10:00:00Z');
    await t.engine.recordEvent('lessons', { user: { id: 'u' }, value: 4 });
    const rows = await t.engine.getMetricEventSummary('u', 'lessons', { aggregation: 'daily', startDate: '2026-03-02', endDate: '2026-03-02' });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ total: 4 });
  });
});
