/**
 * A `Tenant-ID` that names no possible tenant (longer than 255 characters) is bad input like any other: it
 * gets a status the operation documents (README, "The wire API": where an operation lists only 422, a bad
 * request is 422), not 400 everywhere. It used to be refused before the route was matched. Found by a fuzz
 * of the HTTP handler.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  metrics: [{ key: 'cards', name: 'Cards' }],
  leaderboards: [{ key: 'board', name: 'Board', rankBy: 'metric', metricKey: 'cards', start: '2026-01-01' }],
});

it('a bad Tenant-ID answers the status each operation documents', async () => {
  const handler = createHttpHandler(createEngine({ config, store: createMemoryStore() }), { apiKeys: ['k'] });
  const send = (method: string, path: string, body?: unknown) =>
    handler(new Request(`http://t${path}`, { method, headers: { 'x-api-key': 'k', 'tenant-id': 'x'.repeat(256), 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));
  // GET /leaderboards/{key} documents 200, 401, 404 and 422: 422.
  const board = await send('GET', '/v1/leaderboards/board');
  expect(board.status).toBe(422);
  expect(((await board.json()) as { error: string }).error).toContain('tenant');
  // POST /metrics/{key}/event documents 400: 400.
  expect((await send('POST', '/v1/metrics/cards/event', { user: { id: 'u' }, value: 1 })).status).toBe(400);
  // An admin operation that lists only 422.
  expect((await send('GET', '/admin/v1/metrics')).status).toBe(422);
  // No route: 404, as without the header.
  expect((await send('GET', '/v1/nothing-here')).status).toBe(404);
  // Nothing was recorded anywhere.
  expect((await createEngine({ config, store: createMemoryStore() }).getLeaderboard('board')).rankings).toEqual([]);
});
