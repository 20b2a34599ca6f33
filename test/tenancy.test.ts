/**
 * Multi-tenancy (issue 16): `engine.tenant(id)` over `store.tenant(id)` on every store, the HTTP `Tenant-ID`
 * header, application keys bound to a tenant, and the conformance suite's tenancy checks failing on a store
 * whose tenants share data.
 */
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelErrorCode, type Store } from '../src/index.js';
import { createApplicationKey, createHttpHandler, type ApplicationKeyRecord } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { createRedisRankIndex, withRankIndex } from '../src/redis.js';
import { runStoreConformance, sequentialIds } from '../src/testing/index.js';
import { allChanges } from './helpers.js';
import { REDIS_URL, uniq } from './servers.js';
import { freshStore } from './stores.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-05', runUnit: 'day', runInterval: 7 }],
});

const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
afterAll(async () => {
  await redis?.quit();
});

const kinds = ['memory', 'postgres', ...(REDIS_URL ? ['postgres+redis'] : [])] as const;

async function storeOf(kind: (typeof kinds)[number]): Promise<Store> {
  if (kind === 'postgres+redis') {
    const { createPostgresStore } = await import('../src/postgres.js');
    const pg = (await freshStore('postgres')) as ReturnType<typeof createPostgresStore>;
    // The parity helper's PostgreSQL store counts ranks in SQL; Redis gives them here, as in production.
    return withRankIndex(pg, createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('tenancy')}:` }));
  }
  return freshStore(kind as 'memory' | 'postgres');
}

for (const kind of kinds) {
  describe(`engine.tenant (${kind})`, () => {
    it('keeps users, boards, counters, ledger and change events of each tenant apart', async () => {
      const engine = createEngine({ config, store: await storeOf(kind), clock: () => new Date('2026-01-06T10:00:00Z'), newId: sequentialIds(kind) });
      const acme = engine.tenant('acme');
      const globex = engine.tenant('globex');
      expect([engine.tenantId, acme.tenantId, globex.tenantId]).toEqual([null, 'acme', 'globex']);

      const a1 = await acme.recordEvent('lessons', { user: { id: 'u1' }, value: 5 }, { idempotencyKey: 'k1' });
      const a2 = await acme.recordEvent('lessons', { user: { id: 'u2' }, value: 9 });
      const d1 = await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 }, { idempotencyKey: 'k1' });
      // The same user id and idempotency key: a new user and a new event in the default tenant, not a replay.
      expect(d1.idempotentReplayed).toBe(false);
      expect([a1.total, a2.total, d1.total]).toEqual([5, 9, 1]);
      expect(d1.leaderboards.weekly?.rank).toBe(1);
      expect((await acme.getUserLeaderboard('u1', 'weekly')).rank).toBe(2);
      expect((await engine.getUserLeaderboard('u1', 'weekly')).rank).toBe(1);
      expect((await acme.getLeaderboard('weekly')).rankings.map((r) => r.userId)).toEqual(['u2', 'u1']);
      expect((await engine.getLeaderboard('weekly')).rankings.map((r) => r.userId)).toEqual(['u1']);
      expect((await globex.getLeaderboard('weekly')).rankings).toEqual([]);
      // Counters: completions and rarity are per tenant.
      const completions = async (e: typeof engine) => (await e.listAchievements()).map((a) => [a.key, a.completions]);
      expect(await completions(acme)).toEqual([['first', 2]]);
      expect(await completions(engine)).toEqual([['first', 1]]);
      expect(await completions(globex)).toEqual([['first', 0]]);
      // Ledger and summaries.
      expect((await acme.getPointsSummary('u1', 'xp')).total).toBe(50);
      expect((await engine.getPointsSummary('u1', 'xp')).total).toBe(10);
      await expect(globex.getPointsSummary('u1', 'xp')).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'NOT_FOUND'));
      // A replay is per tenant too.
      expect((await acme.recordEvent('lessons', { user: { id: 'u1' }, value: 5 }, { idempotencyKey: 'k1' })).idempotentReplayed).toBe(true);
      // Change events: each tenant's outbox holds its own.
      const users = async (e: typeof engine) => [...new Set((await allChanges(e)).map((c) => c.userId))].sort();
      expect(await users(acme)).toEqual(['u1', 'u2']);
      expect(await users(engine)).toEqual(['u1']);
      expect(await allChanges(globex)).toEqual([]);
      // Erasing acme's u1 leaves the default tenant's u1 whole.
      await acme.deleteUser('u1');
      expect((await engine.getUser('u1')).id).toBe('u1');
      expect((await engine.getPointsSummary('u1', 'xp')).total).toBe(10);
      expect((await acme.getLeaderboard('weekly')).rankings.map((r) => r.userId)).toEqual(['u2']);
    });

    it('is one engine per tenant id, tenants do not nest, and bad ids are refused typed', async () => {
      const engine = createEngine({ config, store: await storeOf(kind) });
      expect(engine.tenant('acme')).toBe(engine.tenant('acme'));
      expect(engine.tenant('acme').tenant('globex')).toBe(engine.tenant('globex'));
      for (const bad of ['', 'x'.repeat(256), 'a\u0000b', 42 as unknown as string]) {
        expect(() => engine.tenant(bad)).toThrow(expect.objectContaining({ code: 'VALIDATION' }));
      }
    });
  });
}

describe('engine.tenant on a store without tenants', () => {
  it('is refused with a typed error naming Store.tenant', () => {
    const { tenant: _none, ...plain } = createMemoryStore();
    const engine = createEngine({ config, store: plain as Store });
    expect(() => engine.tenant('acme')).toThrow(/Store\.tenant/);
    expect(() => engine.tenant('acme')).toThrow(expect.objectContaining({ code: 'VALIDATION' }));
  });
});

describe('the conformance suite catches tenants that share data', () => {
  it('fails every tenancy check on a store whose tenant(id) is the store itself', async () => {
    const report = await runStoreConformance(() => {
      const store = createMemoryStore();
      const view: Store = Object.assign(Object.create(null) as Store, store, { tenant: () => view });
      return view;
    });
    const failed = report.failed.map((f) => f.name).filter((n) => n.startsWith('tenants'));
    expect(failed.length).toBeGreaterThanOrEqual(3);
  });

  it('fails on a store whose tenants share the outbox only', async () => {
    const report = await runStoreConformance(() => {
      const root = createMemoryStore();
      const withSharedOutbox = (s: ReturnType<typeof createMemoryStore>): Store => ({
        ...s,
        readChanges: root.readChanges,
        claimConsumer: root.claimConsumer,
        advanceConsumer: root.advanceConsumer,
        getMarks: root.getMarks,
        appendChanges: root.appendChanges,
        tenant: (id: string) => withSharedOutbox(root.tenant(id)),
      });
      return { ...root, tenant: (id: string) => withSharedOutbox(root.tenant(id)) };
    });
    expect(report.failed.map((f) => f.name)).toContain('tenants: outbox events, consumers, marks, due users and deliveries are per tenant; pruning one tenant leaves the others');
  });
});

describe('HTTP Tenant-ID', () => {
  const SERVER = 'server-key-123';
  const SECRET = 'a-secret-of-more-than-16-bytes';
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date('2026-01-06T10:00:00Z'), newId: sequentialIds('http') });
  const records: ApplicationKeyRecord[] = [];
  const issue = (userId: string, tenant?: string) => {
    const { key, ...record } = createApplicationKey(userId, { secret: SECRET, ...(tenant === undefined ? {} : { tenant }) });
    records.push(record);
    return key;
  };
  const acmeKey = issue('u1', 'acme');
  const defaultKey = issue('u1');
  const handler = createHttpHandler(engine, { apiKeys: [SERVER], applicationKeys: { secret: SECRET, records } });
  const call = (method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    handler(new Request(`http://laurel.test${path}`, { method, headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));

  it('scopes application and admin calls to the tenant; no header is the default tenant', async () => {
    const event = (value: number) => ({ user: { id: 'u1' }, value });
    expect((await call('POST', '/v1/metrics/lessons/event', { 'x-api-key': SERVER, 'tenant-id': 'acme' }, event(5))).status).toBe(201);
    expect((await call('POST', '/v1/metrics/lessons/event', { 'x-api-key': SERVER }, event(2))).status).toBe(201);
    const total = async (headers: Record<string, string>) => {
      const res = await call('GET', '/v1/users/u1/metrics/lessons', { 'x-api-key': SERVER, ...headers });
      return res.status === 200 ? ((await res.json()) as { current: number }).current : res.status;
    };
    expect([await total({ 'tenant-id': 'acme' }), await total({}), await total({ 'tenant-id': 'globex' })]).toEqual([5, 2, 404]);
    expect((await engine.tenant('acme').getUserMetric('u1', 'lessons')).current).toBe(5);
    // The admin batch route writes into the header's tenant.
    const batch = await call('POST', '/admin/v1/metrics/events', { 'x-api-key': SERVER, 'tenant-id': 'globex' }, [{ key: 'lessons', user: { id: 'g1' }, value: 3, idempotencyKey: 'i1' }]);
    expect(batch.status).toBe(202);
    expect(await total({ 'tenant-id': 'globex' })).toBe(404);
    expect((await engine.tenant('globex').getUserMetric('g1', 'lessons')).current).toBe(3);
    await expect(engine.getUser('g1')).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'NOT_FOUND'));
  });

  it('refuses an application key outside its own tenant (403)', async () => {
    await engine.tenant('acme').recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    await engine.recordEvent('lessons', { user: { id: 'u1' }, value: 1 });
    expect((await call('GET', '/v1/users/u1', { 'x-api-key': acmeKey, 'tenant-id': 'acme' })).status).toBe(200);
    expect((await call('GET', '/v1/users/u1', { 'x-api-key': acmeKey })).status).toBe(403);
    expect((await call('GET', '/v1/users/u1', { 'x-api-key': acmeKey, 'tenant-id': 'globex' })).status).toBe(403);
    expect((await call('GET', '/v1/users/u1', { 'x-api-key': defaultKey })).status).toBe(200);
    expect((await call('GET', '/v1/users/u1', { 'x-api-key': defaultKey, 'tenant-id': 'acme' })).status).toBe(403);
  });

  it('answers an invalid Tenant-ID with a client error and changes nothing', async () => {
    const res = await call('POST', '/v1/metrics/lessons/event', { 'x-api-key': SERVER, 'tenant-id': 't'.repeat(256) }, { user: { id: 'zz' }, value: 1 });
    expect([400, 422]).toContain(res.status);
    await expect(engine.getUser('zz')).rejects.toSatisfy((e) => isLaurelErrorCode(e, 'NOT_FOUND'));
  });
});
