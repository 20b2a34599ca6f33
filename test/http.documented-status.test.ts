/**
 * Bad requests the HTTP layer refuses before an operation runs answer a status that operation documents
 * (README, "The wire API"), and bad ids are refused before any store read, on every store (docs/rules.md,
 * section 9). Found by a fuzz of the HTTP handler against the OpenAPI documents:
 * - a malformed percent-encoding in the path was 400 on every operation, also those that list only 422;
 * - a bad `Tenant-ID` was 400 on operations that list only 200, 401 and 404 (now 404: it names nothing);
 * - admin routes that read the store directly (a boost by id, the users named by a pause deletion) passed a
 *   NUL to PostgreSQL and answered 503 with the driver's error (the memory store said "not found").
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';
import { freshStore, onEachStore } from './stores.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  streak: { frequency: 'daily' },
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 't', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }],
  leaderboards: [{ key: 'board', name: 'Board', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-01' }],
});

const send = (handler: ReturnType<typeof createHttpHandler>, method: string, path: string, headers: Record<string, string> = {}) =>
  handler(new Request(`http://t${path}`, { method, headers: { 'x-api-key': 'k', ...headers } }));

it('a malformed percent-encoding in the path: the status the operation documents', async () => {
  const handler = createHttpHandler(createEngine({ config, store: createMemoryStore() }), { apiKeys: ['k'] });
  // These list 200/201, 401, 404 and 422: a bad request is 422.
  for (const [method, path] of [
    ['GET', '/v1/users/%FF/metrics'],
    ['GET', '/v1/users/%E0%A4/streak'],
    ['GET', '/v1/leaderboards/%FF'],
    ['POST', '/v1/achievements/%FF/complete'],
  ] as const) {
    const res = await send(handler, method, path);
    expect(res.status, `${method} ${path}`).toBe(422);
    expect(((await res.json()) as { error: string }).error).toMatch(/percent-encoding/);
  }
  // A wrong method is still 405, and a path that names no route 404.
  expect((await send(handler, 'PUT', '/v1/leaderboards/%FF')).status).toBe(405);
  // A configuration write answers 405 whatever the path's ids (as with a well-formed id).
  const write = await send(handler, 'POST', '/admin/v1/points/%FF/levels');
  expect(write.status).toBe(405);
  expect(write.headers.get('allow')).toBe('GET');
  expect((await send(handler, 'GET', '/v1/nothing/%FF')).status).toBe(404);
});

it('a bad Tenant-ID on an operation that lists only 200, 401 and 404: 404', async () => {
  const handler = createHttpHandler(createEngine({ config, store: createMemoryStore() }), { apiKeys: ['k'] });
  for (const path of ['/v1/points/xp', '/v1/points/xp/boosts', '/v1/points/xp/levels']) {
    const res = await send(handler, 'GET', path, { 'tenant-id': 'x'.repeat(256) });
    expect(res.status, path).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain('tenant');
  }
});

onEachStore('admin routes that read the store: a NUL in an id', (kind) => {
  it('is a validation error before any read, as through the engine', async () => {
    const engine = createEngine({ config, store: await freshStore(kind), clock: () => new Date('2026-01-06T12:00:00Z') });
    await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
    const handler = createHttpHandler(engine, { apiKeys: ['k'] });
    const boost = await send(handler, 'GET', '/admin/v1/points/xp/boosts/a%00b');
    expect(boost.status).toBe(422);
    expect(((await boost.json()) as { error: string }).error).toMatch(/NUL/);
    const pauses = await send(handler, 'DELETE', '/admin/v1/streaks/pauses?ids=p1&userId=a%00b');
    expect(pauses.status).toBe(422);
    expect(((await pauses.json()) as { error: string }).error).toMatch(/userId.*NUL/);
    // A batch deletion: the item's issue says what is wrong with it, not what the driver said.
    const deleted = await send(handler, 'DELETE', '/admin/v1/points/xp/boosts?ids=a%00b');
    expect(deleted.status).toBe(200);
    const body = (await deleted.json()) as { deleted: unknown[]; issues: { message: string }[] };
    expect(body.deleted).toEqual([]);
    expect(body.issues[0]?.message).toMatch(/must be well-formed text without NUL/);
    // The user is as they were.
    expect((await engine.getUserMetric('u', 'lessons')).current).toBe(1);
  });
});
