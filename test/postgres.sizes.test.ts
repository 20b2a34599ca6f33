/**
 * Migration 003: utf16_hex (plpgsql, with an ASCII fast path) gives what 002's SQL function gave, and
 * index_sizes (entries per index, kept by commit_batch, read for thresholds) matches the entries: after
 * inserts, updates, removals, refused commits, repeated writes in one batch, the backfill of the migration,
 * and (on a server) many batches racing over the same users and indexes.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore, type PostgresClient } from '../src/postgres.js';
import type { LeaderboardWrite } from '../src/core/types.js';
import type { Commit } from '../src/store/types.js';
import { sampleState } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';

type Q = { query: (text: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }> };

const commitOf = (userId: string, expectedVersion: number, leaderboard: LeaderboardWrite[]): Commit => ({
  userId,
  expectedVersion,
  state: sampleState(userId, expectedVersion + 1),
  ledger: [],
  leaderboard,
  counters: {},
  idempotency: null,
});
const at = (s: number) => `2026-01-04T10:00:${String(s).padStart(2, '0')}.000Z`;
const put = (index: string, userId: string, value: number, s = 0, thresholdRank?: number): LeaderboardWrite => ({
  index,
  userId,
  value,
  reachedAt: at(s),
  date: '2026-01-04',
  ...(thresholdRank === undefined ? {} : { thresholdRank }),
});
const drop = (index: string, userId: string, thresholdRank?: number): LeaderboardWrite => ({ index, userId, remove: true, date: '2026-01-04', ...(thresholdRank === undefined ? {} : { thresholdRank }) });

/** index_sizes and the counted entries, per index (indexes with no entries and a 0 size left out). */
async function sizes(q: Q, schema: string) {
  const stored = (await q.query(`SELECT idx, n FROM "${schema}".index_sizes WHERE n <> 0 ORDER BY idx`)).rows.map((r) => [String(r.idx), Number(r.n)]);
  const counted = (await q.query(`SELECT idx, count(*) AS n FROM "${schema}".entries GROUP BY idx ORDER BY idx`)).rows.map((r) => [String(r.idx), Number(r.n)]);
  return { stored, counted };
}

// 002's definition, to compare against.
const OLD_UTF16_HEX = (schema: string) =>
  `CREATE OR REPLACE FUNCTION "${schema}".old_utf16_hex(s text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT coalesce(string_agg(CASE WHEN ascii(c) < 65536 THEN lpad(to_hex(ascii(c)), 4, '0') ELSE to_hex(55232 + (ascii(c) >> 10)) || to_hex(56320 + (ascii(c) & 1023)) END, '' ORDER BY i), '') FROM unnest(string_to_array(s, NULL)) WITH ORDINALITY AS u(c, i) $$`;
const SAMPLES = ['', 'a', 'user-1', ' ~', '~~~', 'A B\tC', '\u0001x', '\u007f', 'é', 'ab\u00e9', '\ud7ff', '\ue000', '\uffff', '😀', 'a😀b', '\u{10ffff}', 'x'.repeat(300), "it's", '\\1', '%_'];

function suite(label: string, client: () => PostgresClient & Q) {
  describe(label, () => {
    it('utf16_hex gives what the SQL function of migration 002 gave', async () => {
      const schema = uniq('u16');
      await createPostgresStore({ client: client(), schema }).migrate();
      await client().query(OLD_UTF16_HEX(schema));
      for (const s of SAMPLES) {
        const r = (await client().query(`SELECT "${schema}".utf16_hex($1) AS a, "${schema}".old_utf16_hex($1) AS b`, [s])).rows[0];
        expect(r?.a, JSON.stringify(s)).toBe(r?.b);
      }
    });

    it('index_sizes follows inserts, updates, removals, refused commits and repeated writes; thresholds at the boundary', async () => {
      const schema = uniq('sizes');
      const store = createPostgresStore({ client: client(), schema });
      await store.migrate();
      const thr = (r: unknown) => (r as { ranks: { threshold?: number }[] }).ranks.map((x) => x.threshold);
      // Two entries, rank 3 asked: 0 without a scan.
      expect(thr(await store.commit(commitOf('a', 0, [put('lb|x', 'a', 10, 0, 3)])))).toEqual([0]);
      expect(thr(await store.commit(commitOf('b', 0, [put('lb|x', 'b', 8, 1, 3)])))).toEqual([0]);
      // The third entry fills rank 3: the scan runs and finds it.
      expect(thr(await store.commit(commitOf('c', 0, [put('lb|x', 'c', 6, 2, 3)])))).toEqual([6]);
      // An update changes no size.
      expect(thr(await store.commit(commitOf('c', 1, [put('lb|x', 'c', 7, 3, 3)])))).toEqual([7]);
      // A removal, then a new entry, in one commit, with thresholds after each.
      expect(thr(await store.commit(commitOf('a', 1, [drop('lb|x', 'a', 3), put('lb|y', 'a', 1, 4, 1)])))).toEqual([0, 1]);
      // Removing what is not there changes nothing.
      expect(thr(await store.commit(commitOf('d', 0, [drop('lb|x', 'd', 2)])))).toEqual([7]);
      // A batch: repeated writes of one entry, an insert and a removal of the same entry, a refused commit.
      const outcomes = await store.commitBatch!([
        commitOf('e', 0, [put('lb|x', 'e', 5, 5, 3)]),
        commitOf('e', 1, [put('lb|x', 'e', 9, 6, 3), put('lb|y', 'e', 2, 6)]),
        commitOf('f', 0, [put('lb|x', 'f', 1, 7, 4)]),
        commitOf('f', 1, [drop('lb|x', 'f', 4)]),
        commitOf('b', 7, [put('lb|x', 'b', 100, 8, 1)]), // stale version: refused, writes nothing
        commitOf('g', 0, [put('lb|z', 'g', 3, 9, 1)]),
      ]);
      expect(outcomes.map((o) => (o instanceof Error ? 'conflict' : thr(o)))).toEqual([[5], [7, undefined], [1], [0], 'conflict', [3]]);
      // Unranked writes are counted as well.
      await store.commit(commitOf('h', 0, [{ ...put('pt|p', 'h', 4, 10), unranked: true }]));
      const s = await sizes(client(), schema);
      expect(s.stored).toEqual(s.counted);
      expect(Object.fromEntries(s.stored)).toEqual({ 'lb|x': 3, 'lb|y': 2, 'lb|z': 1, 'pt|p': 1 });
    });

    it('a batch of ranked and unranked writes (repeated, refused, mixed on one index) equals its commits one by one', async () => {
      const un = (w: LeaderboardWrite): LeaderboardWrite => ({ ...w, unranked: true });
      const commits = (): Commit[] => [
        commitOf('a', 0, [put('lb|x', 'a', 5, 0), un(put('pt|p', 'a', 1, 0)), un(put('pt|q', 'a', 1, 0))]),
        commitOf('b', 0, [put('lb|x', 'b', 7, 1), un(put('pt|p', 'b', 2, 1))]),
        commitOf('a', 1, [put('lb|x', 'a', 9, 2), un(put('pt|p', 'a', 3, 2)), un(put('pt|p', 'a', 4, 2))]),
        commitOf('c', 3, [put('lb|x', 'c', 1, 3), un(put('pt|p', 'c', 9, 3))]), // stale: refused, writes nothing
        commitOf('b', 1, [put('lb|x', 'b', 9, 3), un(put('pt|p', 'b', 5, 3)), un(put('pt|m', 'b', 5, 3))]),
        commitOf('d', 0, [un(put('pt|m', 'd', 2, 4)), put('pt|m', 'd', 3, 4, 1)]), // unranked on an index ranked in the batch
        commitOf('e', 0, [un(put('pt|r', 'e', 2, 5)), drop('pt|r', 'e')]),
        commitOf('a', 2, [put('lb|x', 'a', 2, 6), un(put('pt|q', 'a', 7, 6))]),
        commitOf('b', 2, [drop('lb|x', 'b'), un(put('pt|p', 'b', 6, 7))]),
      ];
      const dump = async (schema: string) => ({
        entries: (await client().query(`SELECT idx, user_id, value, reached_at FROM "${schema}".entries ORDER BY idx, user_id`)).rows,
        history: (await client().query(`SELECT idx, user_id, date, previous_rank, rank, previous_value, value FROM "${schema}".rank_history ORDER BY idx, user_id, date`)).rows,
        sizes: await sizes(client(), schema),
      });
      const one = uniq('one_by_one');
      const batch = uniq('batch');
      const s1 = createPostgresStore({ client: client(), schema: one });
      const s2 = createPostgresStore({ client: client(), schema: batch });
      await s1.migrate();
      await s2.migrate();
      // Some entries before, so that updates and inserts both happen.
      for (const s of [s1, s2]) await s.commit(commitOf('z', 0, [put('lb|x', 'z', 6, 0), un(put('pt|p', 'z', 3, 0)), un(put('pt|p', 'a', 8, 0))]));
      const each: unknown[] = [];
      for (const c of commits()) each.push(await s1.commit(c).catch((e: Error) => e.name));
      const all = (await s2.commitBatch!(commits())).map((o) => (o instanceof Error ? o.name : o));
      expect(all).toEqual(each);
      const [d1, d2] = [await dump(one), await dump(batch)];
      expect(d2).toEqual(d1);
      expect(d2.sizes.stored).toEqual(d2.sizes.counted);
      expect(d2.entries.find((r) => r.idx === 'pt|p' && r.user_id === 'a')?.value).toBe(4);
      expect(d2.entries.some((r) => r.user_id === 'c' || r.idx === 'pt|r')).toBe(false);
    });

    it('the migration fills index_sizes from the entries already stored', async () => {
      const schema = uniq('backfill');
      const store = createPostgresStore({ client: client(), schema });
      await store.migrate();
      for (const [i, u] of ['a', 'b', 'c'].entries()) await store.commit(commitOf(u, 0, [put('lb|x', u, i + 1, i), put(`lb|${u}`, u, 1, i)]));
      // As a database migrated up to 002 would be: no sizes, 003 not applied.
      await client().query(`DROP TABLE "${schema}".index_sizes`);
      await client().query(`DELETE FROM "${schema}".migrations WHERE id = '003_commit_batch'`);
      await createPostgresStore({ client: client(), schema }).migrate();
      const s = await sizes(client(), schema);
      expect(s.stored).toEqual(s.counted);
      expect(Object.fromEntries(s.stored)).toEqual({ 'lb|a': 1, 'lb|b': 1, 'lb|c': 1, 'lb|x': 3 });
    });
  });
}

const lite = new PGlite();
afterAll(() => lite.close());
suite('index sizes (PGlite)', () => lite as unknown as PostgresClient & Q);

describe.skipIf(!PG_URL)('index sizes (server, needs LAUREL_PG_URL)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 8 });
  afterAll(() => pool.end());
  suite('pg Pool', () => pool as unknown as PostgresClient & Q);

  it('stay exact under batches racing over the same users and indexes (inserts and removals), without deadlocks', async () => {
    const schema = uniq('sizes_race');
    const store = createPostgresStore({ client: pool, schema });
    await store.migrate();
    const USERS = 12;
    const versions = new Map<string, number>();
    let conflicts = 0;
    // Each worker owns some users (so its expected versions are right) but all write the same indexes, in
    // different orders; writes add and remove entries.
    await Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        for (let round = 0; round < 15; round++) {
          const mine = Array.from({ length: USERS }, (_, u) => `w${w}u${u}`);
          if ((round + w) % 2) mine.reverse();
          const commits = mine.map((u, k) => {
            const v = versions.get(u) ?? 0;
            const idx = ['lb|a', 'lb|b', 'lb|c'];
            if (k % 2) idx.reverse();
            return commitOf(
              u,
              v,
              idx.map((i, j) => ((round + k + j) % 3 === 0 ? drop(i, u, 5) : put(i, u, 1 + ((round * 7 + k + j) % 11), round, 5))),
            );
          });
          const outcomes = await store.commitBatch!(commits);
          outcomes.forEach((o, k) => {
            const u = commits[k]!.userId;
            if (o instanceof Error) conflicts++;
            else versions.set(u, (versions.get(u) ?? 0) + 1);
          });
        }
      }),
    );
    expect(conflicts).toBe(0);
    const s = await sizes(pool as unknown as Q, schema);
    expect(s.stored).toEqual(s.counted);
    expect(s.counted.length).toBe(3);
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  });
});
