/**
 * A bench worker (a copy of test/workers/record.ts with the number of calls as a parameter): records its
 * share of the planned events against PostgreSQL (or PGlite, with LAUREL_PG_URL=pglite; optionally with Redis
 * ranks), 8 calls in flight, after its warm-up and the parent's go (see `startTogether`), and prints one JSON
 * line: counts (conflicts: the version or idempotency conflicts the store reported, each one retried by the
 * engine), its CPU time over the timed calls (cpuMs), seconds, p50 and p99 in ms.
 * argv: <worker index> <schema> <redis prefix|-> <processes> <calls>
 */
import Redis from 'ioredis';
import pg from 'pg';
import { createEngine, isLaurelError, isLaurelErrorCode, type Store } from '../../../src/index.js';
import { createPostgresStore } from '../../../src/postgres.js';
import { createRedisRankIndex, withRankIndex } from '../../../src/redis.js';
import { drive, multiConfig, plan, startTogether } from './shared.js';

const [worker, schema] = [Number(process.argv[2]), process.argv[3] as string];
const redisPrefix = process.argv[4] && process.argv[4] !== '-' ? process.argv[4] : undefined;
const processes = Number(process.argv[5] ?? 1);
const calls = Number(process.argv[6] ?? 20_000);
const pglite = process.env.LAUREL_PG_URL === 'pglite';
const pool = pglite ? null : new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 8 });
const lite = pglite ? new (await import('@electric-sql/pglite')).PGlite() : null;
const redis = redisPrefix ? new Redis(process.env.LAUREL_REDIS_URL as string) : null;
const pgStore = createPostgresStore({ client: (pool ?? lite) as pg.Pool, schema, ranks: redis ? 'none' : 'sql' });
if (lite) await pgStore.migrate();
const store = redis ? withRankIndex(pgStore, createRedisRankIndex({ redis, prefix: redisPrefix as string })) : pgStore;
// The store's conflicts, counted at its commit (a subscriber to the engine's `laurel:retry` channel would turn
// the engine's call observation on, some µs a call: work the measured calls would not otherwise do).
let conflicts = 0;
const counted: Store = Object.create(store) as Store;
counted.commit = (c) =>
  store.commit(c).catch((error: unknown) => {
    if (isLaurelErrorCode(error, 'CONFLICT')) conflicts++;
    throw error;
  });
const engine = createEngine({ config: multiConfig, store: counted, retry: { attempts: 100, baseDelayMs: 2 } });

await startTogether(worker, (e) => engine.recordEvent('lessons', { user: { id: e.userId, name: e.userId.toUpperCase() }, value: e.value }, { idempotencyKey: e.key }));
conflicts = 0;
const cpu0 = process.cpuUsage();
const { event, mine } = plan(calls, processes);
let applied = 0;
let replayed = 0;
const timing = await drive(mine(worker), 8, async (j) => {
  const e = event(j);
  try {
    const r = await engine.recordEvent('lessons', { user: { id: e.userId, name: e.userId.toUpperCase() }, value: e.value }, { idempotencyKey: e.key });
    if (r.idempotentReplayed) replayed++;
    else applied++;
  } catch (error) {
    if (isLaurelError(error)) console.error(`worker ${worker}: ${error.code} ${error.message}`);
    throw error;
  }
});
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ worker, applied, replayed, conflicts, cpuMs: (cpu.user + cpu.system) / 1000, ...timing }));
await pool?.end();
await lite?.close();
await redis?.quit();
