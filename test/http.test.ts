import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TrophyApi, TrophyApiClient, TrophyApiError } from '@trophyso/node';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler, toNodeListener } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons completed' }, { key: 'cards', name: 'Cards' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }, { key: 'city', name: 'City', type: 'user' }],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'ios', name: 'On iOS', trigger: 'metric', metricKey: 'lessons', metricValue: 2, eventAttributes: { device: 'ios' } },
    { key: 'onboarded', name: 'Onboarded', trigger: 'api' },
    { key: 'streak2', name: 'Two days', trigger: 'streak', streakLength: 2 },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2 } },
  pointsSystems: [
    { key: 'xp', name: 'XP', levels: [{ key: 'a', name: 'A', points: 0 }, { key: 'b', name: 'B', points: 50 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }, { key: 'onboarded', type: 'achievement', achievementKey: 'onboarded', points: 5 }] },
    { key: 'energy', name: 'Energy', maxPoints: 2, triggers: [{ key: 'signup', type: 'user_creation', points: 2 }, { key: 'hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }, { key: 'per-card', type: 'metric', metricKey: 'cards', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] },
  ],
  leaderboards: [
    { key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-05', runUnit: 'day', runInterval: 7 },
    { key: 'by-city', name: 'By city', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01', breakdownAttributes: ['city'] },
  ],
});

const KEY = 'test-key-123';
let now = new Date('2026-01-06T10:00:00Z');
const store = createMemoryStore();
const engine = createEngine({ config, store, clock: () => now, newId: sequentialIds('http') });
const unexpected: unknown[] = [];
const handler = createHttpHandler(engine, { apiKeys: ['other-key', KEY], maxBodyBytes: 4096, onError: (e) => unexpected.push(e) });
let server: http.Server;
let base = '';
let client: TrophyApiClient;

beforeAll(async () => {
  server = http.createServer(toNodeListener(handler));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  client = new TrophyApiClient({ apiKey: KEY, environment: { api: `${base}/v1`, admin: `${base}/admin/v1` } });
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

describe('the official SDK against Laurel', () => {
  it('records events, with idempotent replays', async () => {
    const res = await client.metrics.event('lessons', { idempotencyKey: 'e-1', user: { id: 'ana', email: 'ana@x.io', tz: 'Europe/Lisbon', attributes: { city: 'Lisbon' } }, value: 1, attributes: { device: 'ios' } });
    expect(res).toMatchObject({ total: 1, idempotencyKey: 'e-1', idempotentReplayed: false });
    expect(res.achievements.map((a) => a.name)).toEqual(['First lesson']);
    expect(res.currentStreak).toMatchObject({ length: 1, frequency: 'daily', extended: true, freezes: 1 });
    expect(res.points.xp).toMatchObject({ total: 10, added: 10 });
    expect(res.leaderboards.weekly).toMatchObject({ rank: 1, previousRank: undefined, threshold: 0 });
    expect(res.leaderboards['by-city']).toMatchObject({ breakdownAttribute: 'city', breakdownAttributeValue: 'Lisbon' });
    const again = await client.metrics.event('lessons', { idempotencyKey: 'e-1', user: { id: 'ana' }, value: 1 });
    expect(again).toMatchObject({ total: 1, idempotentReplayed: true, achievements: [], points: {}, leaderboards: {} });
    await client.metrics.event('lessons', { user: { id: 'ben', attributes: { city: 'Oslo' } }, value: 3, attributes: { device: 'ios' } });
  });

  it('serves users, metrics, summaries, achievements, streaks, points and leaderboards', async () => {
    expect(await client.users.create({ id: 'cy', name: 'Cy' })).toMatchObject({ id: 'cy', name: 'Cy', attributes: {} });
    expect(await client.users.get('ana')).toMatchObject({ id: 'ana', email: 'ana@x.io', tz: 'Europe/Lisbon', attributes: { city: 'Lisbon' } });
    expect(await client.users.identify('ana', { name: 'Ana' })).toMatchObject({ name: 'Ana', email: 'ana@x.io' });
    expect(await client.users.update('ana', { email: 'ana@y.io' })).toMatchObject({ email: 'ana@y.io' });
    expect((await client.users.allMetrics('ana')).map((m) => [m.key, m.current])).toEqual([['lessons', 1], ['cards', 0]]);
    expect(await client.users.singleMetric('ben', 'lessons')).toMatchObject({ current: 3, status: 'active' });
    expect(await client.users.metricEventSummary('ben', 'lessons', { aggregation: 'daily', startDate: '2026-01-05', endDate: '2026-01-07' })).toEqual([
      { date: '2026-01-05', total: 0, change: 0 },
      { date: '2026-01-06', total: 3, change: 3 },
      { date: '2026-01-07', total: 3, change: 0 },
    ]);
    const incomplete = await client.users.achievements('ana', { includeIncomplete: 'true' });
    expect(incomplete[0]).toMatchObject({ completions: 2, rarity: 66.67 }); // ana and ben of three users
    expect(incomplete.map((a) => [a.key, a.achievedAt ? new Date(a.achievedAt).toISOString() : null])).toEqual([['first-lesson', '2026-01-06T10:00:00.000Z'], ['ios', null], ['onboarded', null], ['streak2', null]]);
    const done = await client.achievements.complete('onboarded', { user: { id: 'ana' } });
    expect(done).toMatchObject({ achievement: { key: 'onboarded' }, points: { xp: { added: 5, total: 15 } } });
    expect((await client.achievements.all()).find((a) => a.key === 'onboarded')).toMatchObject({ completions: 1, rarity: 33.33 });
    now = new Date('2026-01-07T10:00:00Z');
    await client.metrics.event('lessons', { user: { id: 'ana' }, value: 1 });
    const streak = await client.users.streak('ana', { historyPeriods: 3 });
    expect(streak).toMatchObject({ length: 2 });
    expect(streak.streakHistory?.map((h) => h.length)).toEqual([0, 1, 2]);
    expect(await client.streaks.list({ userIds: ['ana', 'ben'] })).toEqual([
      { userId: 'ana', streakLength: 2, extended: '2026-01-07T10:00:00.000Z' },
      { userId: 'ben', streakLength: 1, extended: '2026-01-06T10:00:00.000Z' },
    ]);
    const points = await client.users.points('ana', 'xp', { awards: 2 });
    expect(points).toMatchObject({ total: 25 });
    expect(points.awards).toHaveLength(2);
    expect((await client.users.pointsEventSummary('ana', 'xp', { aggregation: 'weekly', startDate: '2026-01-05', endDate: '2026-01-11' }))[0]).toMatchObject({ total: 25, change: 25 });
    expect(await client.points.system('xp')).toMatchObject({ name: 'XP', triggers: [{ type: 'metric', status: 'active' }, { type: 'achievement' }] });
    expect(await client.points.summary('xp')).toHaveLength(11);
    expect((await client.leaderboards.all()).map((b) => b.key)).toEqual(['weekly', 'by-city']);
    const board = await client.leaderboards.get('weekly', { limit: 10 });
    expect(board).toMatchObject({ status: 'active', rankings: [{ userId: 'ben', rank: 1, value: 3 }, { userId: 'ana', userName: 'Ana', rank: 2, value: 2 }] });
    expect((await client.leaderboards.get('by-city', { userAttributes: 'city:Lisbon' })).rankings.map((r) => r.userId)).toEqual(['ana']);
    const mine = await client.users.leaderboard('ana', 'weekly', { numEvents: 5 });
    expect(mine).toMatchObject({ rank: 2, value: 2 });
    expect(mine.history.length).toBe(2);
  });

  it('maps errors to the SDK\'s classes: 401, 404, 422 and 400', async () => {
    const bad = new TrophyApiClient({ apiKey: 'wrong', environment: { api: `${base}/v1`, admin: base } });
    await expect(bad.users.get('ana')).rejects.toBeInstanceOf(TrophyApi.UnauthorizedError);
    // The SDK has a NotFoundError only where its API definition lists a 404; elsewhere the status is on TrophyApiError.
    await expect(client.users.points('ghost', 'xp')).rejects.toBeInstanceOf(TrophyApi.NotFoundError);
    await expect(client.achievements.complete('nope', { user: { id: 'ana' } })).rejects.toBeInstanceOf(TrophyApi.NotFoundError);
    // GET /users/{id} documents no 404 in the service's OpenAPI 1.21.1: an unknown user is 422 there.
    expect(await client.users.get('ghost').catch((e) => e.statusCode)).toBe(422);
    await expect(client.leaderboards.get('nope')).rejects.toBeInstanceOf(TrophyApi.NotFoundError);
    await client.metrics.event('cards', { user: { id: 'dee' }, value: 2 });
    const overdraw = await client.metrics.event('cards', { user: { id: 'dee' }, value: 1 }).catch((e) => e);
    expect(overdraw).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(overdraw.body.error).toContain('Insufficient points');
    const badAttr = await client.metrics.event('lessons', { user: { id: 'dee' }, value: 1, attributes: { colour: 'red' } }).catch((e) => e);
    expect(badAttr).toBeInstanceOf(TrophyApi.BadRequestError);
    expect(badAttr.body.error).toBe('Invalid attribute keys: colour. Please ensure all attribute keys match those set up in the configuration.');
    const unknownMetric = await client.metrics.event('nope', { user: { id: 'dee' }, value: 1 }).catch((e) => e);
    expect(unknownMetric).toBeInstanceOf(TrophyApiError);
    expect(unknownMetric.statusCode).toBe(404);
    await expect(client.users.points('ana', 'xp', { awards: 101 })).rejects.toBeInstanceOf(TrophyApiError);
  });
});

describe('HTTP behaviour', () => {
  it('201 on first use, 202 on replay; the seed path /api/metrics/{key}/event works too', async () => {
    const first = await post('/api/metrics/lessons/event', { user: { id: 'seed' }, value: 2 }, { 'idempotency-key': 'k' });
    expect(first.status).toBe(201);
    const replay = await post('/v1/metrics/lessons/event', { user: { id: 'seed' }, value: 2 }, { 'idempotency-key': 'k' });
    expect(replay.status).toBe(202);
    expect(await replay.json()).toMatchObject({ total: 2, idempotentReplayed: true });
  });

  it('serves the routes the SDK has no method for: levels and level summary', async () => {
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': KEY } });
      return { status: res.status, body: await res.json() };
    };
    expect(await get('/v1/points/xp/levels')).toMatchObject({ status: 200, body: [{ key: 'a', points: 0 }, { key: 'b', points: 50 }] });
    const summary = await get('/v1/points/xp/level-summary');
    expect(summary.status).toBe(200);
    expect((summary.body as { level: { key: string }; users: number }[]).map((l) => l.level.key)).toEqual(['a', 'b']);
    expect((await get('/v1/points/nope/levels')).status).toBe(404);
  });

  it('401 without or with a wrong key; 404 unknown routes; 405 wrong methods with Allow', async () => {
    expect((await fetch(`${base}/v1/users/seed`)).status).toBe(401);
    expect((await fetch(`${base}/v1/users/seed`, { headers: { 'x-api-key': 'test-key-12' } })).status).toBe(401);
    expect(await (await fetch(`${base}/v1/users/seed`)).json()).toEqual({ error: 'Unauthorized: missing or invalid X-API-KEY header.' });
    expect((await fetch(`${base}/v1/nothing/here`, { headers: { 'x-api-key': KEY } })).status).toBe(404);
    expect((await fetch(`${base}/elsewhere`, { headers: { 'x-api-key': KEY } })).status).toBe(404);
    const wrong = await fetch(`${base}/v1/users/seed`, { method: 'DELETE', headers: { 'x-api-key': KEY } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, PUT, PATCH');
  });

  it('malformed JSON, wrong content type and non-object bodies are 400, bad query parameters 422 (the operations document no 400); huge bodies 413', async () => {
    expect((await post('/v1/metrics/lessons/event', '{"user":')).status).toBe(400);
    expect((await post('/v1/metrics/lessons/event', '[1,2]')).status).toBe(400);
    expect((await post('/v1/metrics/lessons/event', { user: { id: 'x' }, value: 1 }, { 'content-type': 'text/plain' })).status).toBe(400);
    expect((await post('/v1/metrics/lessons/event', { user: { id: 'x' }, value: 'NaN' })).status).toBe(400);
    const huge = await post('/v1/metrics/lessons/event', { user: { id: 'x' }, value: 1, pad: 'x'.repeat(10_000) });
    expect(huge.status).toBe(413);
    for (const q of ['awards=0', 'awards=abc', 'awards=1.5']) expect((await fetch(`${base}/v1/users/seed/points/xp?${q}`, { headers: { 'x-api-key': KEY } })).status).toBe(422);
    expect((await fetch(`${base}/v1/users/seed/metrics/lessons/event-summary?aggregation=daily`, { headers: { 'x-api-key': KEY } })).status).toBe(422);
    expect((await fetch(`${base}/v1/leaderboards/weekly?offset=x`, { headers: { 'x-api-key': KEY } })).status).toBe(422);
    expect((await fetch(`${base}/v1/users/seed/streak?historyPeriods=-1`, { headers: { 'x-api-key': KEY } })).status).toBe(422);
    const ids = Array.from({ length: 101 }, (_, i) => `u${i}`).join(',');
    expect((await fetch(`${base}/v1/streaks?userIds=${ids}`, { headers: { 'x-api-key': KEY } })).status).toBe(422);
    expect((await fetch(`${base}/v1/users/%E0%A4%A`, { headers: { 'x-api-key': KEY } })).status).toBe(400);
  });

  it('prototype-pollution attempts change nothing', async () => {
    const res = await post('/v1/metrics/lessons/event', '{"user":{"id":"pp","attributes":{"__proto__":{"polluted":"yes"}}},"value":1,"attributes":{"__proto__":{"x":"1"}}}');
    expect(res.status).toBe(400);
    const res2 = await post('/v1/metrics/lessons/event', '{"__proto__":{"polluted":"yes"},"user":{"id":"pp","__proto__":{"admin":true}},"value":1}');
    expect(res2.status).toBe(201);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    const user = (await (await fetch(`${base}/v1/users/pp`, { headers: { "x-api-key": KEY } })).json()) as { attributes: Record<string, string> };
    expect(Object.keys(user.attributes)).toEqual([]);
  });

  it('unicode user ids round-trip through paths and bodies', async () => {
    for (const id of ['élodie', '用户-42', '🙂 space', 'a/b?c#d']) {
      expect((await post('/v1/metrics/lessons/event', { user: { id }, value: 1 })).status).toBe(201);
      const got = await fetch(`${base}/v1/users/${encodeURIComponent(id)}`, { headers: { 'x-api-key': KEY } });
      expect(got.status).toBe(200);
      expect(((await got.json()) as { id: string }).id).toBe(id);
    }
  });

  it('no fuzzed request crashes the server or touches other users\' state', async () => {
    const before = await store.loadUser('ana');
    const methods = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE');
    const segment = fc.oneof(fc.constantFrom('v1', 'api', 'users', 'metrics', 'lessons', 'event', 'points', 'xp', 'leaderboards', 'weekly', 'streaks', 'achievements', '..', '%00', '%zz', '__proto__', 'constructor'), fc.string({ maxLength: 8 }).map(encodeURIComponent));
    const path = fc.array(segment, { maxLength: 6 }).map((s) => `/${s.join('/')}`);
    const query = fc.array(fc.tuple(fc.constantFrom('awards', 'offset', 'limit', 'run', 'userId', 'aggregation', 'startDate', 'endDate', 'userIds', 'historyPeriods', 'numEvents', 'userAttributes'), fc.string({ maxLength: 12 })), { maxLength: 4 }).map((pairs) => new URLSearchParams(pairs).toString());
    const body = fc.oneof(fc.json(), fc.string({ maxLength: 50 }), fc.anything().map((x) => { try { return JSON.stringify(x) ?? 'null'; } catch { return '{}'; } }), fc.constant('{"user":{"id":"fz"},"value":1e999}'));
    const ctype = fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', '');
    await fc.assert(
      fc.asyncProperty(methods, path, query, body, ctype, fc.boolean(), async (method, p, q, b, ct, withKey) => {
        const headers: Record<string, string> = {};
        if (withKey) headers['x-api-key'] = KEY;
        if (ct) headers['content-type'] = ct;
        const res = await fetch(`${base}${p}${q ? `?${q}` : ''}`, { method, headers, ...(method === 'GET' ? {} : { body: b }) });
        expect(res.status).toBeLessThan(500);
        const text = await res.text();
        expect(() => JSON.parse(text)).not.toThrow();
      }),
      { numRuns: 300 },
    );
    expect(unexpected).toEqual([]);
    expect(await store.loadUser('ana')).toEqual(before);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  }, 120_000);
});
