/**
 * The admin routes that read the store itself (pause owners, boost look-ups) fail typed on a store fault, as
 * every engine call does: 503, never a raw 500; and in the per-item boost routes a failed look-up is that
 * item's issue, so an answer never hides items already committed. Found by a fuzz of the HTTP handler.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  metrics: [{ key: 'words', name: 'Words' }],
  streak: { frequency: 'daily' },
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'w', type: 'metric', metricKey: 'words', metricThreshold: 1, points: 1 }] }],
});
const clock = () => new Date('2026-01-06T10:00:00Z');
const send = (h: (r: Request) => Promise<Response>, method: string, path: string, body?: unknown) =>
  h(new Request(`http://t${path}`, { method, headers: { 'x-api-key': 'k', 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));

it('a store fault in a route that reads the store itself answers 503, not 500', async () => {
  for (const [method, path, failing] of [
    ['DELETE', '/admin/v1/streaks/pauses?ids=p1', 'listUsers'],
    ['DELETE', '/admin/v1/streaks/pauses?ids=p1&userId=u1', 'loadUsers'],
    ['GET', '/admin/v1/points/xp/boosts/b1', 'getBoost'],
  ] as const) {
    const store = createMemoryStore();
    (store as unknown as Record<string, () => never>)[failing] = () => {
      throw new Error('connection reset'); // a driver's error
    };
    const errors: unknown[] = [];
    const handler = createHttpHandler(createEngine({ config, store, clock }), { apiKeys: ['k'], onError: (e) => errors.push(e) });
    const res = await send(handler, method, path);
    expect(res.status, `${method} ${path}`).toBe(503);
    expect(((await res.json()) as { error: string }).error).toContain('connection reset');
  }
});

it('PATCH and DELETE boosts: a failed look-up is that item\'s issue, and the items before it are reported', async () => {
  for (const method of ['PATCH', 'DELETE'] as const) {
    const store = createMemoryStore();
    const engine = createEngine({ config, store, clock });
    const handler = createHttpHandler(engine, { apiKeys: ['k'] });
    await engine.identifyUser({ id: 'u1' });
    const { boost: a } = await engine.createBoost({ pointsSystemKey: 'xp', userId: 'u1', name: 'A', start: '2026-01-06', end: '2026-01-09', multiplier: 2 });
    const { boost: b } = await engine.createBoost({ pointsSystemKey: 'xp', userId: 'u1', name: 'B', start: '2026-01-06', end: '2026-01-09', multiplier: 2 });
    const getBoost = store.getBoost.bind(store);
    // The route's own look-up of the second item fails (the engine's look-ups go through the same method:
    // count only the route's, which come first for each item).
    let routeLookups = 0;
    store.getBoost = async (id) => {
      if (id === b.id && ++routeLookups === 1) throw new Error('connection reset');
      return getBoost(id);
    };
    const res =
      method === 'PATCH'
        ? await send(handler, 'PATCH', '/admin/v1/points/xp/boosts', [{ id: a.id, name: 'A2' }, { id: b.id, name: 'B2' }])
        : await send(handler, 'DELETE', `/admin/v1/points/xp/boosts?ids=${a.id},${b.id}`);
    expect(res.status, method).toBe(200);
    const body = (await res.json()) as { updated?: { name: string }[]; deleted?: { id: string }[]; issues: { id: string; severity: string; message: string }[] };
    expect(body.issues, method).toEqual([{ id: b.id, severity: 'error', message: expect.stringContaining('connection reset') }]);
    const names = (await engine.listBoosts('xp', { includeFinished: true })).map((x) => x.name).sort();
    if (method === 'PATCH') {
      expect(body.updated?.map((x) => x.name)).toEqual(['A2']);
      expect(names).toEqual(['A2', 'B']);
    } else {
      expect(body.deleted).toEqual([{ id: a.id }]);
      expect(names).toEqual(['B']);
    }
  }
});

it('PATCH boosts: when the read-back after the updates fails, the answer still says which were updated', async () => {
  const store = createMemoryStore();
  const engine = createEngine({ config, store, clock });
  const handler = createHttpHandler(engine, { apiKeys: ['k'] });
  await engine.identifyUser({ id: 'u1' });
  const { boost: a } = await engine.createBoost({ pointsSystemKey: 'xp', userId: 'u1', name: 'A', start: '2026-01-06', end: '2026-01-09', multiplier: 2 });
  const listBoosts = store.listBoosts.bind(store);
  store.listBoosts = async () => {
    throw new Error('connection reset');
  };
  const res = await send(handler, 'PATCH', '/admin/v1/points/xp/boosts', [{ id: a.id, name: 'A2' }]);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { updated: unknown[]; issues: { id: string; severity: string; message: string }[] };
  store.listBoosts = listBoosts;
  const now = await engine.listBoosts('xp', { includeFinished: true });
  expect(now.map((x) => x.name)).toEqual(['A2']);
  expect(body.updated).toEqual([]);
  expect(body.issues).toEqual([{ id: now[0]?.id, severity: 'warning', message: expect.stringContaining('could not be read back') }]);
});
