/**
 * A gamification API server: Laurel's engine behind the hosted service's wire API, on `node:http`.
 * Run with `npm run serve` (PORT and LAUREL_API_KEY from the environment; defaults 3000 and "dev-key").
 *
 *   curl -X POST localhost:3000/v1/metrics/lessons/event -H 'X-API-KEY: dev-key' \
 *     -H 'Content-Type: application/json' -d '{"user":{"id":"u1","tz":"Europe/Paris"},"value":1}'
 *
 * Clients of the official `@trophyso/node` SDK point `environment: { api: 'http://localhost:3000/v1' }` here.
 */
import http from 'node:http';
import { createEngine, defineConfig } from 'laurel';
import { createHttpHandler, toNodeListener } from 'laurel/http';
import { createMemoryStore } from 'laurel/memory';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons completed' }],
  attributes: [{ key: 'device', name: 'Device', type: 'event' }],
  achievements: [
    { key: 'first-lesson', name: 'First lesson', trigger: 'metric', metricKey: 'lessons', metricValue: 1 },
    { key: 'onboarded', name: 'Finished onboarding', trigger: 'api' },
  ],
  streak: { frequency: 'daily' },
  pointsSystems: [
    { key: 'xp', name: 'XP', levels: [{ key: 'novice', name: 'Novice', points: 0 }, { key: 'pro', name: 'Pro', points: 100 }], triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] },
    { key: 'energy', name: 'Energy', maxPoints: 5, triggers: [{ key: 'signup', type: 'user_creation', points: 5 }, { key: 'hourly-refill', type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }, { key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: -1, blockIfOutOfPoints: true }] },
  ],
  leaderboards: [{ key: 'weekly', name: 'Weekly lessons', rankBy: 'metric', metricKey: 'lessons', start: '2026-01-05', runUnit: 'day', runInterval: 7 }],
});

const engine = createEngine({ config, store: createMemoryStore() });
const handler = createHttpHandler(engine, { apiKeys: [process.env.LAUREL_API_KEY ?? 'dev-key'], onError: (e) => console.error(e) });
const server = http.createServer(toNodeListener(handler));
const port = Number(process.env.PORT ?? 3000);
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  const where = typeof address === 'object' && address ? `http://${address.address}:${address.port}` : String(address);
  console.log(`Laurel API listening on ${where} (routes under /v1 and /api/metrics/{key}/event)`);
  if (process.env.LAUREL_EXIT_AFTER_START) server.close();
});
