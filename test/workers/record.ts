/**
 * One of the multi-process test's workers: records its share of the planned events against a real
 * PostgreSQL (and optionally Redis ranks), 8 calls in flight, and prints one JSON line of counts.
 * argv: <worker index> <schema> [redis prefix|-] [processes, default 4]
 */
import Redis from 'ioredis';
import pg from 'pg';
import { createEngine, isLaurelError } from '../../src/index.js';
import { createPostgresStore } from '../../src/postgres.js';
import { createRedisRankIndex, withRankIndex } from '../../src/redis.js';
import { EVENTS, multiConfig, plannedEvent, processOf } from './shared.js';

const [worker, schema] = [Number(process.argv[2]), process.argv[3] as string];
const redisPrefix = process.argv[4] && process.argv[4] !== '-' ? process.argv[4] : undefined;
const processes = Number(process.argv[5] ?? 4);
const pglite = process.env.LAUREL_PG_URL === 'pglite';
const pool = pglite ? null : new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 8 });
const lite = pglite ? new (await import('@electric-sql/pglite')).PGlite() : null;
const redis = redisPrefix ? new Redis(process.env.LAUREL_REDIS_URL as string) : null;
const pgStore = createPostgresStore({ client: (pool ?? lite) as pg.Pool, schema, ranks: redis ? 'none' : 'sql' });
if (lite) await pgStore.migrate();
const store = redis ? withRankIndex(pgStore, createRedisRankIndex({ redis, prefix: redisPrefix as string })) : pgStore;
const engine = createEngine({ config: multiConfig, store, retry: { attempts: 100, baseDelayMs: 2 } });

const mine = Array.from({ length: EVENTS }, (_, j) => j).filter((j) => processes === 1 || processOf(j) === worker);
let next = 0;
let applied = 0;
let replayed = 0;
const latencies: number[] = [];
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < mine.length) {
      const e = plannedEvent(mine[next++] as number);
      const s = performance.now();
      try {
        const r = await engine.recordEvent('lessons', { user: { id: e.userId, name: e.userId.toUpperCase() }, value: e.value }, { idempotencyKey: e.key });
        if (r.idempotentReplayed) replayed++;
        else applied++;
      } catch (error) {
        if (isLaurelError(error)) console.error(`worker ${worker}: ${error.code} ${error.message}`);
        throw error;
      }
      latencies.push(performance.now() - s);
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
latencies.sort((a, b) => a - b);
console.log(JSON.stringify({ worker, applied, replayed, seconds, p50: latencies[Math.floor(latencies.length * 0.5)], p99: latencies[Math.floor(latencies.length * 0.99)] }));
await pool?.end();
await lite?.close();
await redis?.quit();
