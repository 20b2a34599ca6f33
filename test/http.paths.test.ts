/**
 * Every path segment counts, empty ones too. The handler used to drop empty segments, so a client whose URL
 * template met an empty id reached another route: `GET /v1/users//metrics` read user "metrics", and
 * `GET /v1/leaderboards/` (an empty key) listed every board. They are 404 now; a path parameter is never empty.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  metrics: [{ key: 'cards', name: 'Cards' }],
  leaderboards: [{ key: 'top', name: 'Top', rankBy: 'metric', metricKey: 'cards', start: '2026-01-01' }],
});

it('empty path segments name no route', async () => {
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date('2026-01-06T10:00:00Z') });
  // A user whose id is a word that also names a sub-resource.
  await engine.recordEvent('cards', { user: { id: 'metrics' }, value: 1 });
  const handler = createHttpHandler(engine, { apiKeys: ['k'] });
  const get = async (path: string) => (await handler(new Request(`http://t${path}`, { headers: { 'x-api-key': 'k' } }))).status;
  expect(await get('/v1/users/metrics')).toBe(200);
  expect(await get('/v1/users//metrics')).toBe(404);
  expect(await get('/v1/users/metrics/')).toBe(404);
  expect(await get('//v1/users/metrics')).toBe(404);
  expect(await get('/v1//users/metrics')).toBe(404);
  expect(await get('/v1/leaderboards')).toBe(200);
  expect(await get('/v1/leaderboards/')).toBe(404);
  expect(await get('/v1/leaderboards/top')).toBe(200);
  expect(await get('/v1/leaderboards/top/')).toBe(404);
  expect(await get('/admin/v1/')).toBe(404);
  // An id that is percent-encoded still reaches its route, slashes included.
  await engine.recordEvent('cards', { user: { id: 'a/b' }, value: 1 });
  expect(await get('/v1/users/a%2Fb')).toBe(200);
});
