/**
 * A user's board read for a run (`GET /users/{id}/leaderboards/{key}?run=`, `getUserLeaderboard`) gives that
 * run's status, as `GET /leaderboards/{key}?run=` does for the same run. It gave the board's status now: a
 * finished week read as `active`. Found by a fuzz of the HTTP layer.
 */
import { expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { createHttpHandler } from '../src/http.js';
import { createMemoryStore } from '../src/memory.js';

const config = defineConfig({
  timeZone: 'UTC',
  metrics: [{ key: 'words', name: 'Words' }],
  leaderboards: [{ key: 'weekly', name: 'Weekly', rankBy: 'metric', metricKey: 'words', start: '2026-01-05', runUnit: 'day', runInterval: 7, timeZone: 'UTC' }],
});

it('the status of the run read, the same on both endpoints and in the engine', async () => {
  let now = new Date('2026-01-06T10:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => now });
  await engine.recordEvent('words', { user: { id: 'u' }, value: 3 });
  now = new Date('2026-01-20T10:00:00Z');
  const handler = createHttpHandler(engine, { apiKeys: ['k'] });
  const get = async (path: string) => (await (await handler(new Request(`http://t${path}`, { headers: { 'x-api-key': 'k' } }))).json()) as { status: string; value: number | null };
  const past = await get('/v1/users/u/leaderboards/weekly?run=2026-01-05');
  const rankings = await get('/v1/leaderboards/weekly?run=2026-01-05');
  expect(rankings.status).toBe('finished');
  expect(past.status).toBe('finished');
  expect(past.value).toBe(3);
  expect((await engine.getUserLeaderboard('u', 'weekly', { run: '2026-01-05' })).status).toBe('finished');
  // The current run: active on both.
  expect((await get('/v1/users/u/leaderboards/weekly')).status).toBe('active');
  expect((await get('/v1/leaderboards/weekly')).status).toBe('active');
});
