/**
 * A backend on PostgreSQL: `LAUREL_PG_URL=postgres://user:pass@localhost:5432/db npm run example:postgres`
 * (add `LAUREL_REDIS_URL=redis://localhost:6379` for Redis ranks). Without LAUREL_PG_URL it runs on an
 * in-process PGlite database instead, so the example always runs.
 *
 * Many processes can run this at once against one database: every commit is one transaction with a
 * version check, so nothing is lost or counted twice.
 */
import { PGlite } from '@electric-sql/pglite';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createEngine, defineConfig, withRankIndex, type Store } from 'laurel';
import { createPostgresStore } from 'laurel/postgres';
import { createRedisRankIndex } from 'laurel/redis';

const config = defineConfig({
  metrics: [{ key: 'orders', name: 'Orders placed' }],
  achievements: [{ key: 'regular', name: 'Regular', trigger: 'metric', metricKey: 'orders', metricValue: 3 }],
  streak: { frequency: 'weekly' },
  pointsSystems: [{ key: 'coins', name: 'Coins', triggers: [{ key: 'per-order', type: 'metric', metricKey: 'orders', metricThreshold: 1, points: 5 }, { key: 'regular', type: 'achievement', achievementKey: 'regular', points: 20 }] }],
  leaderboards: [{ key: 'monthly', name: 'Top customers', rankBy: 'metric', metricKey: 'orders', start: '2026-01-01', runUnit: 'month', runInterval: 1 }],
});

const url = process.env.LAUREL_PG_URL;
const pool = url ? new pg.Pool({ connectionString: url }) : null;
const lite = url ? null : new PGlite();
const redis = process.env.LAUREL_REDIS_URL ? new Redis(process.env.LAUREL_REDIS_URL) : null;
// A schema of its own per run keeps the example repeatable; a real backend uses the default "laurel".
const schema = `example_${Date.now().toString(36)}`;
const pgStore = createPostgresStore({ client: (pool ?? lite) as NonNullable<typeof pool>, schema, ranks: redis ? 'none' : 'sql' });
await pgStore.migrate();
const store: Store = redis ? withRankIndex(pgStore, createRedisRankIndex({ redis, prefix: `${schema}:` })) : pgStore;
console.log(`Store: ${url ? 'PostgreSQL server' : 'PGlite (set LAUREL_PG_URL for a server)'}${redis ? ' + Redis ranks' : ''}, schema "${schema}"`);

const engine = createEngine({ config, store });
for (const [user, orders] of [['ada', 4], ['bob', 2], ['cy', 3]] as const) {
  for (let i = 1; i <= orders; i++) {
    const r = await engine.recordEvent('orders', { user: { id: user, name: user.toUpperCase() }, value: 1 }, { idempotencyKey: `${user}-order-${i}` });
    const coins = r.points.coins;
    console.log(`${user} order ${i}: total ${r.total}, coins ${coins?.total}${r.achievements.length ? `, unlocked ${r.achievements.map((a) => a.name).join(', ')}` : ''}, rank ${r.leaderboards.monthly?.rank}`);
  }
}
const retried = await engine.recordEvent('orders', { user: { id: 'ada' }, value: 1 }, { idempotencyKey: 'ada-order-1' });
console.log(`ada's first order sent again: replayed=${retried.idempotentReplayed}, total still ${retried.total}`);
const board = await engine.getLeaderboard('monthly');
console.log(`${board.name} (${board.run.start}..${board.run.end}):`, board.rankings.map((r) => `#${r.rank} ${r.userName} ${r.value}`).join(', '));
console.log('Coins summary for ada:', await engine.getPointsSummary('ada', 'coins', { awards: 3 }).then((s) => `${s.total} (${s.awards.map((a) => a.awarded).join(', ')})`));

await pool?.end();
await lite?.close();
await redis?.quit();
