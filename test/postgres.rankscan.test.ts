/**
 * Migration 010 (issue 11) counts a ranked write's previous and new rank in one scan; migration 009 counted
 * them in two. The commits of a workload whose totals rise, fall, stand still and tie, on two boards (one with
 * a threshold), applied by 010 through the engine and replayed by 009's function: every answer and every row
 * the same.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, defineConfig } from '../src/index.js';
import { MIGRATIONS } from '../src/postgres/migrations.js';
import { createPostgresStore } from '../src/postgres.js';
import { sequentialIds } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';
import { interceptedPool } from './pg-intercept.js';

const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
  leaderboards: [
    { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' },
    { key: 'daily', name: 'Daily', rankBy: 'points', pointsSystemKey: 'xp', start: '2026-01-01', runUnit: 'day', runInterval: 1, maxParticipants: 5 },
  ],
});

const TABLES: [string, string][] = [
  ['users', 'tenant, user_id'],
  ['ledger', 'seq'],
  ['idempotency', 'tenant, user_id, metric_key, key'],
  ['entries', 'tenant, idx, user_id'],
  ['rank_history', 'tenant, idx, user_id, date'],
  ['outbox', 'seq'],
  ['counters', 'tenant, name'],
  ['index_sizes', 'tenant, idx'],
];

describe.skipIf(!PG_URL)('migration 010: ranks counted in one scan (needs LAUREL_PG_URL)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await pool.end();
  });

  async function dump(schema: string) {
    const out: Record<string, unknown[]> = {};
    for (const [table, order] of TABLES) {
      out[table] = (await pool.query(`SELECT * FROM "${schema}".${table} ORDER BY ${order}`)).rows.map((r) => {
        delete r.xid; // the writing transaction's id
        return r;
      });
    }
    return out;
  }

  it('gives every answer and row that 009 gives for the same commits', async () => {
    const live = uniq('rs010');
    const old = uniq('rs009');
    schemas.push(live, old);
    // The engine on 010, with every commit statement and its answer kept.
    const commits: { params: unknown[]; answer: unknown }[] = [];
    const client = interceptedPool(pool, async (text, params, run) => {
      const r = await run();
      if (params && text.includes('.commit_batch(')) commits.push({ params, answer: r.rows[0]?.r });
      return r;
    });
    const store = createPostgresStore({ client: client as unknown as pg.Pool, schema: live });
    await store.migrate();
    let now = Date.parse('2026-03-01T00:00:00Z');
    const engine = createEngine({ config, store, clock: () => new Date((now += 3_000_000)), newId: sequentialIds() });
    let seed = 11;
    const rnd = (n: number) => Math.floor(((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * n);
    for (let i = 0; i < 600; i++) {
      // Totals rise, fall (negative values), stand still (0) and tie (many users, small values).
      await engine.recordEvent('lessons', { user: { id: `u${rnd(25)}` }, value: rnd(6) - 2 }, { idempotencyKey: `k${i}` });
    }
    const batch = Array.from({ length: 30 }, (_, i) => ({ metricKey: 'lessons' as const, user: { id: `u${rnd(25)}` }, value: rnd(6) - 2, idempotencyKey: `b${i}` }));
    await engine.recordEvents(batch);
    expect(commits.length).toBeGreaterThan(600);
    // Both ranks were counted, not only new ones: users moved down as well as up.
    const ranks = commits.flatMap((c) => ((c.answer as { ranks?: unknown[][] }[]) ?? []).flatMap((o) => o.ranks ?? []));
    expect(ranks.some((r) => r[0] !== null && r[1] !== null && (r[0] as number) < (r[1] as number))).toBe(true);
    expect(ranks.some((r) => r[0] !== null && r[1] !== null && (r[0] as number) > (r[1] as number))).toBe(true);

    // The same commits on a schema whose commit_batch is 009's.
    await createPostgresStore({ client: pool, schema: old }).migrate();
    const m009 = MIGRATIONS.find((m) => m.id === '009_lean_commit');
    await pool.query((m009 as { sql: string }).sql.replaceAll('{{schema}}', old));
    const answers: unknown[] = [];
    for (const c of commits) {
      const [json, token, sqlRanks, tenant] = c.params as [string, string, boolean, string];
      answers.push((await pool.query(`SELECT "${old}".commit_batch($1::jsonb, $2::text, $3::boolean, $4::text) AS r`, [json.replaceAll(`"${live}"`, `"${old}"`), token, sqlRanks, tenant])).rows[0]?.r);
    }
    expect(answers).toEqual(commits.map((c) => c.answer));
    expect(await dump(old)).toEqual(await dump(live));
  }, 120_000);
});
