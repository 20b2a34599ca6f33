import { readFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore, MIGRATIONS } from '../src/postgres.js';
import { describeStoreConformance } from '../src/testing/index.js';

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
    expect(await plan(`SELECT * FROM ${schema}.ledger WHERE user_id = 'u' AND kind = 'points' AND key = 'xp' AND at >= '2026' AND at < '2027' ORDER BY at, seq`)).toContain('ledger_range');
    expect(await plan(`SELECT count(*) FROM ${schema}.entries WHERE idx = 'i' AND (neg_value, reached_at, user_id) < (-5, '2026', 'u')`)).toContain('entries_rank');
    await db.query('SET enable_seqscan = on');
  });
});
