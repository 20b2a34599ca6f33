import { describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createApplicationKey, createHttpHandler, isApplicationKey, type ApplicationKeyRecord } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { sequentialIds } from '../src/testing/index.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons completed' }],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'onboarded', name: 'Onboarded', trigger: 'api' },
  ],
  streak: { frequency: 'daily', freezes: { initial: 1, max: 2 } },
  pointsSystems: [{ key: 'xp', name: 'XP', levels: [{ key: 'a', name: 'A', points: 0 }, { key: 'b', name: 'B', points: 50 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-05', runUnit: 'day', runInterval: 7 }],
});

const SERVER = 'server-key-123';
const SECRET = 'a-secret-of-more-than-16-bytes';
const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date('2026-01-06T10:00:00Z'), newId: sequentialIds('keys') });

// The app's own key table: only what createApplicationKey says to store (no key), as a database would return it.
const table = new Map<string, ApplicationKeyRecord>();
function issue(userId: string) {
  const { key, ...record } = createApplicationKey(userId, { secret: SECRET });
  table.set(record.prefix, JSON.parse(JSON.stringify(record)) as ApplicationKeyRecord);
  return { key, record };
}
const ana = issue('ana');
const bob = issue('bob');
const handler = createHttpHandler(engine, { apiKeys: [SERVER], applicationKeys: { secret: SECRET, lookup: async (prefix) => table.get(prefix) ?? null } });

async function call(key: string | null, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = key === null ? {} : { 'x-api-key': key };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await handler(new Request(`http://laurel.test${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

const summary = 'aggregation=daily&startDate=2026-01-01&endDate=2026-01-06';
/** Every operation with a user in the path or body, for user `u`. */
const userScoped = (u: string): [string, string, unknown?][] => [
  ['POST', '/v1/metrics/lessons/event', { user: { id: u }, value: 1 }],
  ['POST', '/api/metrics/lessons/event', { user: { id: u }, value: 1 }],
  ['POST', '/v1/users', { id: u, name: 'Renamed' }],
  ['GET', `/v1/users/${u}`],
  ['PUT', `/v1/users/${u}`, { name: 'Put' }],
  ['PATCH', `/v1/users/${u}`, { name: 'Patched' }],
  ['GET', `/v1/users/${u}/preferences`],
  ['PATCH', `/v1/users/${u}/preferences`, { notifications: { recap: [] } }],
  ['GET', `/v1/users/${u}/metrics`],
  ['GET', `/v1/users/${u}/metrics/lessons`],
  ['GET', `/v1/users/${u}/metrics/lessons/event-summary?${summary}`],
  ['GET', `/v1/users/${u}/achievements`],
  ['GET', `/v1/users/${u}/streak`],
  ['GET', `/v1/streaks?userIds=${u}`],
  ['GET', `/v1/users/${u}/points/xp`],
  ['GET', `/v1/users/${u}/points/xp/event-summary?${summary}`],
  ['GET', `/v1/users/${u}/points/xp/boosts`],
  ['GET', `/v1/users/${u}/leaderboards/weekly`],
  ['GET', `/v1/users/${u}/wrapped?year=2026`],
  ['POST', '/v1/achievements/onboarded/complete', { user: { id: u } }],
];

describe('createApplicationKey', () => {
  it('makes an app_<prefix>.<body> key and a record without the body', () => {
    const { key, record } = issue('carol');
    expect(isApplicationKey(key)).toBe(true);
    expect(key).toMatch(/^app_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(key.startsWith(`${record.prefix}.`)).toBe(true);
    expect(Object.keys(record).sort()).toEqual(['hash', 'id', 'prefix', 'userId']);
    expect(record.userId).toBe('carol');
    expect(record.id).toMatch(/^[0-9a-f-]{36}$/);
    const secretBody = key.slice(record.prefix.length + 1);
    expect(JSON.stringify(record)).not.toContain(secretBody);
    expect(JSON.stringify(record)).not.toContain(key);
    expect(createApplicationKey('carol', { secret: SECRET }).key).not.toBe(key);
  });

  it('refuses bad user ids and short secrets', () => {
    expect(() => createApplicationKey('', { secret: SECRET })).toThrow(/userId/);
    expect(() => createApplicationKey('x'.repeat(256), { secret: SECRET })).toThrow(/userId/);
    expect(() => createApplicationKey('ana', { secret: 'short' })).toThrow(/secret/);
    // A tenant HTTP cannot name: a header value's surrounding whitespace is taken off on the way.
    for (const tenant of ['acme ', ' acme', '\tacme']) expect(() => createApplicationKey('ana', { secret: SECRET, tenant })).toThrow(/whitespace/);
    expect(createApplicationKey('ana', { secret: SECRET, tenant: 'a c' }).tenant).toBe('a c');
    // Only spaces and tabs: HTTP keeps other whitespace (a no-break space) in a header value.
    expect(createApplicationKey('ana', { secret: SECRET, tenant: 'acme\u00a0' }).tenant).toBe('acme\u00a0');
    expect(() => createHttpHandler(engine, { applicationKeys: { secret: 'short', records: [] } })).toThrow(/secret/);
    expect(() => createHttpHandler(engine, { applicationKeys: { secret: SECRET } })).toThrow(/lookup or records/);
    // Application keys alone are enough to build a handler (an in-memory list here).
    expect(() => createHttpHandler(engine, { applicationKeys: { secret: SECRET, records: [] } })).not.toThrow();
  });
});

describe('per-user application keys on the handler', () => {
  it('each user reads and writes its own resources', async () => {
    for (const [who, u] of [[ana, 'ana'], [bob, 'bob']] as const) {
      for (const [method, path, body] of userScoped(u)) {
        const res = await call(who.key, method, path, body);
        expect([200, 201], `${method} ${path}: ${JSON.stringify(res.body)}`).toContain(res.status);
      }
      expect((await call(who.key, 'GET', `/v1/users/${u}/points/xp`)).body).toMatchObject({ total: 20 });
      expect((await call(who.key, 'GET', `/v1/users/${u}/streak`)).body).toMatchObject({ length: 1 });
      expect((await call(who.key, 'GET', `/v1/users/${u}`)).body).toMatchObject({ id: u, name: 'Patched' });
    }
  });

  it("answers 403 { error } for every operation on another user's resources, and changes nothing", async () => {
    const before = await call(SERVER, 'GET', '/v1/users/bob/metrics/lessons');
    for (const [method, path, body] of userScoped('bob')) {
      const res = await call(ana.key, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(typeof res.body?.error).toBe('string');
    }
    // A mix of ids, or a user object without an id, is refused too.
    expect((await call(ana.key, 'GET', '/v1/streaks?userIds=ana,bob')).status).toBe(403);
    expect((await call(ana.key, 'GET', '/v1/streaks?userIds=ana&userIds=bob')).status).toBe(403);
    expect((await call(ana.key, 'POST', '/v1/metrics/lessons/event', { user: {}, value: 1 })).status).toBe(403);
    expect((await call(ana.key, 'POST', '/v1/metrics/lessons/event', { value: 1 })).status).toBe(403);
    expect((await call(ana.key, 'PUT', '/v1/users/bob', { id: 'ana', name: 'x' })).status).toBe(403);
    expect(await call(SERVER, 'GET', '/v1/users/bob/metrics/lessons')).toEqual(before);
    expect((await call(SERVER, 'GET', '/v1/users/bob')).body).toMatchObject({ name: 'Patched' });
  });

  it('reads public configuration and rankings', async () => {
    for (const path of ['/v1/achievements', '/v1/leaderboards', '/v1/leaderboards/weekly', '/v1/leaderboards/weekly?userId=bob', '/v1/points/xp', '/v1/points/xp/boosts', '/v1/points/xp/levels', '/v1/points/xp/level-summary', '/v1/points/xp/summary']) {
      expect((await call(ana.key, 'GET', path)).status, path).toBe(200);
    }
  });

  it('refuses the admin API (403) to application keys, not to server keys', async () => {
    for (const [method, path, body] of [
      ['GET', '/admin/v1/metrics'],
      ['GET', '/admin/v1/no-such-route'],
      ['POST', '/admin/v1/metrics/events', [{ metricKey: 'lessons', user: { id: 'ana' }, value: 1, idempotencyKey: 'k1' }]],
      ['POST', '/admin/v1/streaks/freezes', { freezes: [{ userId: 'ana' }] }],
    ] as [string, string, unknown?][]) {
      const res = await call(ana.key, method, path, body);
      expect(res.status, path).toBe(403);
      expect(typeof res.body?.error).toBe('string');
    }
    expect((await call(SERVER, 'GET', '/admin/v1/metrics')).status).toBe(200);
  });

  it('answers 401 for tampered, unknown, revoked and mismatched keys', async () => {
    const body = ana.key.slice(ana.record.prefix.length + 1);
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const other = createApplicationKey('ana', { secret: 'another-secret-of-16-bytes' }).key;
    const unknownPrefix = createApplicationKey('ana', { secret: SECRET }).key; // never stored
    const bobBody = bob.key.slice(bob.record.prefix.length + 1);
    for (const key of [
      flip(ana.key, ana.key.length - 1), // tampered body
      flip(ana.key, 5), // tampered prefix
      `${ana.record.prefix}.${bobBody}`, // a wrong body for the prefix
      `${bob.record.prefix}.${body}`,
      unknownPrefix,
      `app_${other.slice(4)}`,
      other, // another secret
      ana.record.prefix,
      ana.record.hash,
      `${ana.key}x`,
      'app_.',
      '',
    ]) {
      const res = await call(key, 'GET', '/v1/users/ana');
      expect(res.status, key).toBe(401);
    }
    expect((await call(null, 'GET', '/v1/users/ana')).status).toBe(401);
    // Revoked: the record is gone from the app's table.
    const dave = issue('dave');
    expect((await call(dave.key, 'GET', '/v1/achievements')).status).toBe(200);
    table.delete(dave.record.prefix);
    expect((await call(dave.key, 'GET', '/v1/achievements')).status).toBe(401);
    // A record whose stored hash was altered does not verify.
    const erin = issue('erin');
    table.set(erin.record.prefix, { ...erin.record, hash: ana.record.hash });
    expect((await call(erin.key, 'GET', '/v1/achievements')).status).toBe(401);
    table.set(erin.record.prefix, { ...erin.record, hash: 'short' });
    expect((await call(erin.key, 'GET', '/v1/achievements')).status).toBe(401);
  });

  it('keeps server keys (and verifyApiKey) at full access', async () => {
    for (const u of ['ana', 'bob']) {
      for (const [method, path, b] of userScoped(u)) expect([200, 201], `${method} ${path}`).toContain((await call(SERVER, method, path, b)).status);
    }
    expect((await call(SERVER, 'GET', '/v1/streaks?userIds=ana,bob')).status).toBe(200);
    const custom = createHttpHandler(engine, { verifyApiKey: (k) => k === 'custom', applicationKeys: { secret: SECRET, records: [ana.record] } });
    const get = (key: string, path: string) => custom(new Request(`http://laurel.test${path}`, { headers: { 'x-api-key': key } }));
    expect((await get('custom', '/v1/users/bob')).status).toBe(200);
    expect((await get(ana.key, '/v1/users/ana')).status).toBe(200);
    expect((await get(ana.key, '/v1/users/bob')).status).toBe(403);
    expect((await get(bob.key, '/v1/users/bob')).status).toBe(401); // not in this handler's records
  });
});
