import { readFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore, MIGRATIONS, type PostgresClient, type PostgresStore } from '../src/postgres.js';
import { sampleState } from '../src/testing/index.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
import { PG_URL, uniq } from './servers.js';

const db = new PGlite();
let n = 0;
afterAll(() => db.close());

/** A fresh schema per store, so every check starts empty. */
async function freshStore(ranks: 'sql' | 'none' = 'sql') {
  const store = createPostgresStore({ client: db, schema: `conformance_${++n}`, ranks });
  await store.migrate();
  return store;
}

describeStoreConformance('postgres (PGlite)', () => freshStore());

describe('postgres migrations', () => {
  it('are idempotent and match the shipped SQL files', async () => {
    const store = createPostgresStore({ client: db, schema: 'migrate_twice' });
    await store.migrate();
    await store.migrate();
    await Promise.all([store.migrate(), store.migrate()]);
    const applied = await db.query<{ id: string }>('SELECT id FROM migrate_twice.migrations');
    expect(applied.rows.map((r) => r.id)).toEqual(MIGRATIONS.map((m) => m.id));
    for (const m of MIGRATIONS) expect(readFileSync(new URL(`../migrations/${m.id}.sql`, import.meta.url), 'utf8')).toBe(m.sql);
  });

  it('rejects unsafe schema names', () => {
    expect(() => createPostgresStore({ client: db, schema: 'x"; DROP TABLE y; --' })).toThrow(/Invalid schema/);
  });

  it('serves ledger and rank reads from indexes (the plans use them)', async () => {
    const store = await freshStore();
    await store.commit({ userId: 'u', expectedVersion: 0, state: { user: { id: 'u' } } as never, ledger: [], leaderboard: [], counters: {}, idempotency: null });
    const schema = `conformance_${n}`;
    await db.query('SET enable_seqscan = off');
    const plan = async (sql: string) => (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    // The store's reads, in the default tenant ('', migration 008).
    expect(await plan(`SELECT * FROM ${schema}.ledger WHERE tenant = '' AND user_id = 'u' AND kind = 'points' AND key = 'xp' AND at >= '2026' AND at < '2027' ORDER BY at, seq`)).toContain('ledger_range');
    expect(await plan(`SELECT count(*) FROM ${schema}.entries WHERE tenant = '' AND idx = 'i' AND (neg_value, reached_at, user_utf16) < (-5, '2026', ${schema}.utf16_hex('u'))`)).toContain('entries_order');
    expect(await plan(`SELECT user_id FROM ${schema}.entries WHERE tenant = '' AND idx = 'i' ORDER BY neg_value, reached_at, user_utf16 LIMIT 10`)).toContain('entries_order');
    await db.query('SET enable_seqscan = on');
  });

  it('serves readEvents pages and eraseUser look-ups from indexes (migration 005)', async () => {
    const store = await freshStore();
    await store.commit({ userId: 'u', expectedVersion: 0, state: { user: { id: 'u' } } as never, ledger: [], leaderboard: [], counters: {}, idempotency: null });
    const schema = `conformance_${n}`;
    // A few users with rows of several metrics and kinds, and the planner's statistics of them.
    await db.query(
      `INSERT INTO ${schema}.ledger (id, user_id, kind, key, at, delta, total) SELECT 'r' || i, 'u' || (i % 20), CASE WHEN i % 3 = 0 THEN 'points' ELSE 'metric' END, 'm' || (i % 7), '2026-01-01T00:00:' || lpad((i % 60)::text, 2, '0') || '.000Z', 1, i FROM generate_series(1, 4000) AS i`,
    );
    await db.query(`ANALYZE ${schema}.ledger`);
    await db.query('SET enable_seqscan = off');
    const plan = async (sql: string) => (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    // Every metric: one backward range scan after the cursor, no sort.
    const all = await plan(`SELECT * FROM ${schema}.ledger WHERE tenant = '' AND user_id = 'u1' AND kind = 'metric' AND (at, key, seq) < ('2026-01-01T00:00:30.000Z', 'm1', 5::bigint) ORDER BY at DESC, key DESC, seq DESC LIMIT 21`);
    expect(all).toContain('ledger_metric_recent');
    expect(all).not.toContain('Sort');
    // (With few rows per metric the planner may read them all and sort; with many it scans backwards.)
    for (const key of ['m1', 'rare']) {
      const one = await plan(`SELECT * FROM ${schema}.ledger WHERE tenant = '' AND user_id = 'u1' AND kind = 'metric' AND key = '${key}' AND (key, at, seq) < ('${key}', '2026-01-01T00:00:30.000Z', 5::bigint) ORDER BY at DESC, seq DESC LIMIT 21`);
      expect(one).toContain('ledger_range');
    }
    expect(await plan(`SELECT idx FROM ${schema}.entries WHERE tenant = '' AND user_id = 'u'`)).toContain('entries_user');
    expect(await plan(`SELECT idx FROM ${schema}.rank_history WHERE tenant = '' AND user_id = 'u'`)).toContain('rank_history_user');
    expect(await plan(`SELECT 1 FROM ${schema}.ledger WHERE tenant = '' AND user_id = 'u'`)).toContain('ledger_user_seq');
    expect(await plan(`SELECT 1 FROM ${schema}.idempotency WHERE tenant = '' AND user_id = 'u'`)).toMatch(/idempotency_pkey/);
    expect(await plan(`SELECT 1 FROM ${schema}.entry_removals WHERE tenant = '' AND user_id = 'u'`)).toMatch(/entry_removals_pkey/);
    await db.query('SET enable_seqscan = on');
  });
});

/**
 * Ties on (value, reachedAt) are ordered by user id in UTF-16 code-unit order (JavaScript's `<`), as in the
 * memory store and the Redis rank index. UTF-8 byte order differs between characters above U+FFFF (stored as
 * surrogates D800..DFFF) and U+E000..U+FFFF.
 */
const TIED = ['\uE000', '😀', 'a', '\uFFFF', '𐀀', 'ab', '\u00e9'];
const jsOrder = [...TIED].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));

async function checkTieOrder(store: PostgresStore) {
  const ranks = new Map<string, number | null>();
  for (const id of TIED) {
    const r = await store.commit({
      userId: id,
      expectedVersion: 0,
      state: sampleState(id),
      ledger: [],
      leaderboard: [{ index: 'tie', userId: id, value: 7, reachedAt: '2026-01-05T10:00:00.000Z', date: '2026-01-05' }],
      counters: {},
      idempotency: null,
    });
    // The rank the commit counted: among the ids written so far, by code units.
    const sofar = TIED.slice(0, TIED.indexOf(id) + 1).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    expect(r.ranks[0]?.rank, id).toBe(sofar.indexOf(id) + 1);
    ranks.set(id, r.ranks[0]?.rank ?? null);
  }
  expect((await store.readRange('tie', 0, 20)).map((e) => e.userId)).toEqual(jsOrder);
  expect((await store.scanEntries('tie', 0, 20)).map((e) => e.userId)).toEqual(jsOrder);
  for (const id of TIED) expect((await store.getEntry('tie', id))?.rank, id).toBe(jsOrder.indexOf(id) + 1);
}

describe('ties by user id in code-unit order', () => {
  it('the order is JavaScript string order', () => {
    expect(jsOrder.indexOf('😀')).toBeLessThan(jsOrder.indexOf('\uE000'));
  });
  it('PGlite', async () => checkTieOrder(await freshStore()));
  it.skipIf(!PG_URL)('server (pg Pool)', async () => {
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    try {
      const store = createPostgresStore({ client: pool, schema: uniq('tie') });
      await store.migrate();
      await checkTieOrder(store);
    } finally {
      await pool.end();
    }
  });

  it('upgrading a schema with entries from migration 001 fills the order column', async () => {
    const name = `upgrade_${++n}`;
    const run = async (client: PostgresClient, sql: string) => {
      for (const st of sql.replaceAll('{{schema}}', name).split(/;\s*$/m).map((x) => x.replace(/^\s*--.*$/gm, '').trim()).filter(Boolean)) await client.query(st);
    };
    await run(db as never, (MIGRATIONS[0] as { sql: string }).sql);
    await run(db as never, `CREATE TABLE IF NOT EXISTS "{{schema}}".migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    await db.query(`INSERT INTO ${name}.migrations (id) VALUES ('001_init')`);
    for (const id of TIED) {
      await db.query(`INSERT INTO ${name}.users (user_id, version, state) VALUES ($1, 1, '{}')`, [id]);
      await db.query(`INSERT INTO ${name}.entries (idx, user_id, value, neg_value, reached_at) VALUES ('tie', $1, 7, -7, '2026-01-05T10:00:00.000Z')`, [id]);
    }
    const store = createPostgresStore({ client: db, schema: name });
    await store.migrate();
    expect((await store.readRange('tie', 0, 20)).map((e) => e.userId)).toEqual(jsOrder);
    for (const id of TIED) expect((await store.getEntry('tie', id))?.rank, id).toBe(jsOrder.indexOf(id) + 1);
  });
});
