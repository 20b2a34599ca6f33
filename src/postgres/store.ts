/**
 * `createPostgresStore`: the Laurel store on PostgreSQL, over any client with `query(text, params)`: a `pg`
 * Pool in production, PGlite in tests and small apps. Each commit is one transaction: versioned state
 * update, idempotency record under a unique key, ledger rows, leaderboard entries, counters.
 */
import { ConflictError } from '../errors.js';
import type { IdempotencyRecord, LedgerRow } from '../core/types.js';
import type { Commit, CommitResult, LedgerQuery, RankChange, RankedEntry, RankHistoryRow, Store, VersionedState } from '../store/types.js';
import { MIGRATIONS } from './migrations.js';

/** The result shape shared by `pg` (`rowCount`) and PGlite (`affectedRows`). */
export interface QueryResult {
  rows: Record<string, unknown>[];
  rowCount?: number | null;
  affectedRows?: number;
}

/** Anything that runs a parameterised query. */
export interface Queryable {
  query(text: string, params?: unknown[]): Promise<QueryResult>;
}

/** A `pg` Pool, a PGlite instance, or any single connection with `query`. */
export type PostgresClient = Queryable & {
  connect?: () => Promise<unknown>;
  transaction?: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T>;
  totalCount?: number;
};

export interface PostgresStoreOptions {
  client: PostgresClient;
  /** Schema holding Laurel's tables (default `laurel`). Letters, digits and `_` only. */
  schema?: string;
  /**
   * How transactions run. `pool`: each on a connection checked out of a `pg` Pool. `pglite`: PGlite's
   * `transaction()`. `serial`: BEGIN/COMMIT on the one connection given, one at a time. Default: detected.
   */
  transactions?: 'pool' | 'pglite' | 'serial';
  /**
   * `sql` (default): ranks are counted in SQL inside the commit, from the rank index (cost grows with the
   * rank). `none`: the store keeps entries but leaves ranks to an external rank index (see `laurel/redis`).
   */
  ranks?: 'sql' | 'none';
}

export interface PostgresStore extends Store {
  /** Creates or upgrades the schema; safe to run from many processes at once and to run again. */
  migrate(): Promise<void>;
  /**
   * One page of an index in rank order with each user's committed version: the source for rebuilding an
   * external rank index (`rebuildRankIndex`). A maintenance read: O(offset + limit).
   */
  scanEntries(index: string, offset: number, limit: number): Promise<(RankedEntry & { version: number })[]>;
}

const SERIALIZATION_CODES = new Set(['40001', '40P01']);
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const nullableNum = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));

/**
 * Creates a PostgreSQL store. Call `migrate()` once before use.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * import { createPostgresStore } from 'laurel/postgres';
 * const store = createPostgresStore({ client: new pg.Pool({ connectionString: process.env.DATABASE_URL }) });
 * await store.migrate();
 * ```
 */
export function createPostgresStore(options: PostgresStoreOptions): PostgresStore {
  const schema = options.schema ?? 'laurel';
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) throw new Error(`Invalid schema name: ${JSON.stringify(schema)}`);
  const client = options.client;
  const mode = options.transactions ?? (typeof client.totalCount === 'number' && client.connect ? 'pool' : client.transaction ? 'pglite' : 'serial');
  const sqlRanks = (options.ranks ?? 'sql') === 'sql';
  const t = (name: string) => `"${schema}".${name}`;
  let serialTail: Promise<unknown> = Promise.resolve();

  async function transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    if (mode === 'pglite' && client.transaction) return client.transaction(fn);
    if (mode === 'pool' && client.connect) {
      const conn = (await client.connect()) as Queryable & { release: (err?: Error | boolean) => void };
      try {
        await conn.query('BEGIN');
        const result = await fn(conn);
        await conn.query('COMMIT');
        conn.release();
        return result;
      } catch (error) {
        if (error instanceof ConflictError) {
          // A lost race: the connection is healthy, roll back and reuse it.
          await conn.query('ROLLBACK').then(
            () => conn.release(),
            (e: Error) => conn.release(e),
          );
        } else {
          // Anything else may be a broken connection: destroy it, and the server aborts the transaction.
          conn.release(error instanceof Error ? error : true);
        }
        throw error;
      }
    }
    const run = async () => {
      await client.query('BEGIN');
      try {
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    };
    const next = serialTail.then(run, run);
    serialTail = next.catch(() => undefined);
    return next;
  }

  async function rankOf(q: Queryable, index: string, negValue: number, reachedAt: string, userId: string): Promise<number> {
    const r = await q.query(`SELECT count(*) AS n FROM ${t('entries')} WHERE idx = $1 AND (neg_value, reached_at, user_id) < ($2, $3, $4)`, [index, negValue, reachedAt, userId]);
    return num(r.rows[0]?.n) + 1;
  }

  const UPSERT_ENTRY = `INSERT INTO ${t('entries')} (idx, user_id, value, neg_value, reached_at) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at`;
  // The first write of a day keeps its previous rank and value; every write sets the current ones.
  const UPSERT_HISTORY = `INSERT INTO ${t('rank_history')} (idx, user_id, date, previous_rank, rank, previous_value, value) VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value`;

  async function applyCommit(q: Queryable, c: Commit): Promise<CommitResult> {
    const version = c.expectedVersion + 1;
    // The state, the idempotency record and the ledger rows go in one statement (data-modifying CTEs): the
    // inserts run only when the versioned write matched, and the counts say which part lost a race.
    const params: unknown[] = [c.userId, JSON.stringify(c.state)];
    const userWrite =
      c.expectedVersion === 0
        ? `INSERT INTO ${t('users')} (user_id, version, state) VALUES ($1, 1, $2::jsonb) ON CONFLICT (user_id) DO NOTHING RETURNING 1`
        : `UPDATE ${t('users')} SET version = version + 1, state = $2::jsonb WHERE user_id = $1 AND version = $${params.push(c.expectedVersion)} RETURNING 1`;
    const parts = [`u AS (${userWrite})`];
    if (c.idempotency) {
      const i = c.idempotency;
      const b = params.push(i.metricKey, i.key, i.eventId, i.at) - 4;
      parts.push(`i AS (INSERT INTO ${t('idempotency')} (user_id, metric_key, key, event_id, at) SELECT $1, $${b + 1}, $${b + 2}, $${b + 3}, $${b + 4} WHERE EXISTS (SELECT 1 FROM u) ON CONFLICT DO NOTHING RETURNING 1)`);
    }
    if (c.ledger.length > 0) {
      const cols = (f: (r: LedgerRow) => unknown) => params.push(c.ledger.map(f));
      const [id, user, kind, key, at, delta, total, data] = [
        cols((r) => r.id),
        cols((r) => r.userId),
        cols((r) => r.kind),
        cols((r) => r.key),
        cols((r) => r.at),
        cols((r) => r.delta),
        cols((r) => r.total),
        cols((r) => JSON.stringify(r.data)),
      ];
      parts.push(
        `l AS (INSERT INTO ${t('ledger')} (id, user_id, kind, key, at, delta, total, data)
         SELECT r.id, r.user_id, r.kind, r.key, r.at, r.delta, r.total, r.data::jsonb
         FROM unnest($${id}::text[], $${user}::text[], $${kind}::text[], $${key}::text[], $${at}::text[], $${delta}::float8[], $${total}::float8[], $${data}::text[]) WITH ORDINALITY AS r(id, user_id, kind, key, at, delta, total, data, n)
         WHERE EXISTS (SELECT 1 FROM u) ORDER BY r.n)`,
      );
    }
    const counts = (
      await q.query(`WITH ${parts.join(', ')} SELECT (SELECT count(*) FROM u) AS u${c.idempotency ? ', (SELECT count(*) FROM i) AS i' : ''}`, params)
    ).rows[0] as { u: unknown; i?: unknown };
    if (num(counts.u) !== 1) throw new ConflictError(`Version conflict for user ${JSON.stringify(c.userId)}: expected version ${c.expectedVersion}.`);
    if (c.idempotency && num(counts.i) !== 1) throw new ConflictError(`Idempotency key ${JSON.stringify(c.idempotency.key)} was already used for this user and metric.`);
    // Counter rows are locked in name order so that concurrent commits never deadlock on them.
    for (const name of Object.keys(c.counters).sort()) {
      await q.query(`INSERT INTO ${t('counters')} (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = ${t('counters')}.value + EXCLUDED.value`, [name, c.counters[name]]);
    }
    const ranks: RankChange[] = [];
    for (const w of c.leaderboard) {
      if (w.unranked || !sqlRanks) {
        // Entries only: one statement, no rank counting, no history.
        const before = w.unranked ? undefined : (await q.query(`SELECT value FROM ${t('entries')} WHERE idx = $1 AND user_id = $2`, [w.index, w.userId])).rows[0];
        if (w.remove) await q.query(`DELETE FROM ${t('entries')} WHERE idx = $1 AND user_id = $2`, [w.index, w.userId]);
        else await q.query(UPSERT_ENTRY, [w.index, w.userId, w.value, -w.value, w.reachedAt]);
        ranks.push({ index: w.index, userId: w.userId, previousRank: null, rank: null, previousValue: before ? num(before.value) : null, value: w.remove ? null : w.value });
        continue;
      }
      // The entry as it was, with its rank, in one statement.
      const before = (
        await q.query(
          `SELECT e.value, (SELECT count(*) FROM ${t('entries')} x WHERE x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_id) < (e.neg_value, e.reached_at, e.user_id)) + 1 AS rank
           FROM ${t('entries')} e WHERE e.idx = $1 AND e.user_id = $2`,
          [w.index, w.userId],
        )
      ).rows[0];
      const previousRank = before ? num(before.rank) : null;
      const previousValue = before ? num(before.value) : null;
      let rank: number | null = null;
      if (w.remove) {
        await q.query(`DELETE FROM ${t('entries')} WHERE idx = $1 AND user_id = $2`, [w.index, w.userId]);
        await q.query(UPSERT_HISTORY, [w.index, w.userId, w.date, previousRank, null, previousValue, null]);
      } else {
        await q.query(UPSERT_ENTRY, [w.index, w.userId, w.value, -w.value, w.reachedAt]);
        // The new rank and the day's history row, in one statement.
        const r = await q.query(
          `WITH r AS (SELECT count(*) + 1 AS rank FROM ${t('entries')} WHERE idx = $1 AND (neg_value, reached_at, user_id) < ($7, $8, $2))
           INSERT INTO ${t('rank_history')} (idx, user_id, date, previous_rank, rank, previous_value, value)
           SELECT $1, $2, $3, $4::integer, r.rank, $5::double precision, $6::double precision FROM r
           ON CONFLICT (idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value RETURNING rank`,
          [w.index, w.userId, w.date, previousRank, previousValue, w.value, -w.value, w.reachedAt],
        );
        rank = num(r.rows[0]?.rank);
      }
      ranks.push({ index: w.index, userId: w.userId, previousRank, rank, previousValue, value: w.remove ? null : w.value });
    }
    return { version, ranks };
  }

  const toRow = (r: Record<string, unknown>): LedgerRow => ({
    id: String(r.id),
    userId: String(r.user_id),
    kind: r.kind as LedgerRow['kind'],
    key: String(r.key),
    at: String(r.at),
    delta: num(r.delta),
    total: num(r.total),
    data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as LedgerRow['data'],
  });
  const toEntry = (r: Record<string, unknown>, rank: number): RankedEntry => ({ userId: String(r.user_id), value: num(r.value), reachedAt: String(r.reached_at), rank });
  const parseState = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : structuredClone(v));

  return {
    async migrate() {
      await transaction(async (q) => {
        // One migrator at a time across processes; the lock ends with the transaction.
        await q.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`laurel:${schema}`]);
        await q.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
        await q.query(`CREATE TABLE IF NOT EXISTS ${t('migrations')} (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
        const done = new Set((await q.query(`SELECT id FROM ${t('migrations')}`)).rows.map((r) => String(r.id)));
        for (const m of MIGRATIONS) {
          if (done.has(m.id)) continue;
          for (const statement of m.sql.replaceAll('{{schema}}', schema).split(/;\s*$/m).map((s) => s.replace(/^\s*--.*$/gm, '').trim()).filter(Boolean)) await q.query(statement);
          await q.query(`INSERT INTO ${t('migrations')} (id) VALUES ($1)`, [m.id]);
        }
      });
    },

    async loadUser(userId) {
      const r = await client.query(`SELECT version, state FROM ${t('users')} WHERE user_id = $1`, [userId]);
      const row = r.rows[0];
      return row ? { version: num(row.version), state: parseState(row.state) } : null;
    },

    async loadUsers(userIds) {
      if (userIds.length === 0) return [];
      const r = await client.query(`SELECT user_id, version, state FROM ${t('users')} WHERE user_id = ANY($1::text[])`, [[...userIds]]);
      const byId = new Map(r.rows.map((row) => [String(row.user_id), row]));
      return userIds.map((id): VersionedState | null => {
        const row = byId.get(id);
        return row ? { version: num(row.version), state: parseState(row.state) } : null;
      });
    },

    async getIdempotencyRecord(userId, metricKey, key): Promise<IdempotencyRecord | null> {
      const r = await client.query(`SELECT event_id, at FROM ${t('idempotency')} WHERE user_id = $1 AND metric_key = $2 AND key = $3`, [userId, metricKey, key]);
      const row = r.rows[0];
      return row ? { userId, metricKey, key, eventId: String(row.event_id), at: String(row.at) } : null;
    },

    async commit(c) {
      try {
        return await transaction((q) => applyCommit(q, c));
      } catch (error) {
        const code = (error as { code?: unknown })?.code;
        if (typeof code === 'string' && SERIALIZATION_CODES.has(code)) throw new ConflictError(`Transaction conflict (${code}) for user ${JSON.stringify(c.userId)}.`, { cause: error });
        throw error;
      }
    },

    async readLedger(q: LedgerQuery) {
      const params: unknown[] = [q.userId, q.kind, q.key];
      let where = 'user_id = $1 AND kind = $2 AND key = $3';
      if (q.from !== undefined) where += ` AND at >= $${params.push(q.from)}`;
      if (q.to !== undefined) where += ` AND at < $${params.push(q.to)}`;
      const dir = q.order === 'asc' ? 'ASC' : 'DESC';
      const limit = q.limit !== undefined ? ` LIMIT $${params.push(q.limit)}` : '';
      const r = await client.query(`SELECT id, user_id, kind, key, at, delta, total, data FROM ${t('ledger')} WHERE ${where} ORDER BY at ${dir}, seq ${dir}${limit}`, params);
      return r.rows.map(toRow);
    },

    async getEntry(index, userId) {
      const row = (await client.query(`SELECT user_id, value, neg_value, reached_at FROM ${t('entries')} WHERE idx = $1 AND user_id = $2`, [index, userId])).rows[0];
      return row ? toEntry(row, await rankOf(client, index, num(row.neg_value), String(row.reached_at), userId)) : null;
    },

    async readRange(index, offset, limit) {
      const from = Math.max(0, offset);
      const r = await client.query(`SELECT user_id, value, reached_at FROM ${t('entries')} WHERE idx = $1 ORDER BY neg_value, reached_at, user_id OFFSET $2 LIMIT $3`, [index, from, limit]);
      return r.rows.map((row, i) => toEntry(row, from + i + 1));
    },

    async scanEntries(index, offset, limit) {
      const from = Math.max(0, offset);
      const r = await client.query(
        `SELECT e.user_id, e.value, e.reached_at, u.version FROM ${t('entries')} e JOIN ${t('users')} u ON u.user_id = e.user_id
         WHERE e.idx = $1 ORDER BY e.neg_value, e.reached_at, e.user_id OFFSET $2 LIMIT $3`,
        [index, from, limit],
      );
      return r.rows.map((row, i) => ({ ...toEntry(row, from + i + 1), version: num(row.version) }));
    },

    async countEntries(index, range) {
      const params: unknown[] = [index];
      let where = 'idx = $1';
      // value >= min  <=>  neg_value <= -min;  value < max  <=>  neg_value > -max
      if (range?.min !== undefined) where += ` AND neg_value <= $${params.push(-range.min)}`;
      if (range?.max !== undefined) where += ` AND neg_value > $${params.push(-range.max)}`;
      return num((await client.query(`SELECT count(*) AS n FROM ${t('entries')} WHERE ${where}`, params)).rows[0]?.n);
    },

    async readRankHistory(index, userId, limit): Promise<RankHistoryRow[]> {
      const r = await client.query(
        `SELECT date, previous_rank, rank, previous_value, value FROM ${t('rank_history')} WHERE idx = $1 AND user_id = $2 ORDER BY date DESC LIMIT $3`,
        [index, userId, limit],
      );
      return r.rows.map((row) => ({ date: String(row.date), previousRank: nullableNum(row.previous_rank), rank: nullableNum(row.rank), previousValue: nullableNum(row.previous_value), value: nullableNum(row.value) }));
    },

    async getCounters(names) {
      const r = await client.query(`SELECT name, value FROM ${t('counters')} WHERE name = ANY($1::text[])`, [[...names]]);
      const found = new Map(r.rows.map((row) => [String(row.name), num(row.value)]));
      return Object.fromEntries(names.map((n) => [n, found.get(n) ?? 0]));
    },
  };
}
