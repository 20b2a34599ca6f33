/**
 * `createPostgresStore`: the Laurel store on PostgreSQL, over any client with `query(text, params)`: a `pg`
 * Pool in production, PGlite in tests and small apps, or one connection. Each commit is one transaction:
 * versioned state update, idempotency record under a unique key, ledger rows, leaderboard entries, counters.
 *
 * Failures: a version or idempotency race is a `ConflictError` (as are serialization failures and
 * deadlocks); anything else any method meets (a dropped connection, a server that is down or restarting, a
 * driver error) is a `StorageUnavailableError` with the driver's error as `cause`. Broken connections are
 * discarded, so calls succeed again as soon as the server is back. A commit whose connection broke while
 * COMMIT was in flight is read back (by the random token it wrote into the user's row) before it is
 * reported: committed means success, anything else `committed: false`, or `'unknown'` if it could not be read.
 */
import { ConflictError, isLaurelError, storageError, StorageUnavailableError, ValidationError, type LaurelError } from '../errors.js';
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
  /**
   * A `pg` Pool, a PGlite instance, or one open connection (e.g. a connected `pg.Client`). May be omitted
   * when `connect` is given.
   */
  client?: PostgresClient;
  /**
   * Single-connection mode only: returns a new, not yet connected connection, e.g.
   * `() => new pg.Client({ connectionString })`. The store attaches its 'error' listener, then calls the
   * connection's `connect()` if it has one. It opens its connection this way on first use when `client` is
   * not given, and again whenever its connection broke (the broken one is ended and dropped). Without it, a
   * single connection that broke stays broken: every call then fails with `StorageUnavailableError` until the
   * caller creates a new connection and a new store.
   */
  connect?: () => Queryable | Promise<Queryable>;
  /** Schema holding Laurel's tables (default `laurel`). Letters, digits and `_` only. */
  schema?: string;
  /**
   * How transactions run. `pool`: each on a connection checked out of a `pg` Pool. `pglite`: PGlite's
   * `transaction()`. `serial`: BEGIN/COMMIT on the one connection given; every use of that connection (reads
   * included) is queued, one at a time. Default: detected (`serial` when `connect` is given).
   */
  transactions?: 'pool' | 'pglite' | 'serial';
  /**
   * `sql` (default): ranks are counted in SQL inside the commit, from the rank index (cost grows with the
   * rank). `none`: the store keeps entries but leaves ranks to an external rank index (see `laurel/redis`).
   */
  ranks?: 'sql' | 'none';
  /**
   * Observes errors that connections emit outside the store's calls: an idle pooled connection that dropped
   * (the store listens for the Pool's `error` event, which `pg` emits for those), a socket error on a
   * connection the store holds. The store has already discarded the connection; this is for logging.
   * Default: ignored (never rethrown, so a dropped connection cannot end the process).
   */
  onError?: (error: unknown) => void;
  /**
   * How long (ms) a commit whose connection broke during COMMIT keeps trying to read back whether it was
   * committed, before it reports `StorageUnavailableError` with `committed: 'unknown'` (default 5000).
   */
  verifyTimeoutMs?: number;
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
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
const codeOf = (error: unknown): unknown => (typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined);
const isSerialization = (error: unknown) => typeof codeOf(error) === 'string' && SERIALIZATION_CODES.has(codeOf(error) as string);
/** An error reported by the server (it has a severity); anything else is the driver's or the socket's. */
const isServerError = (error: unknown) => typeof error === 'object' && error !== null && typeof (error as { severity?: unknown }).severity === 'string';
const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));

type Listener = (...args: unknown[]) => void;
/** The event-emitter methods of `pg` clients and pools, used when present. */
interface Emitter {
  on?: (event: string, listener: Listener) => unknown;
  removeListener?: (event: string, listener: Listener) => unknown;
}
/** A connection checked out of a `pg` Pool. */
type PooledConnection = Queryable & Emitter & { release: (err?: Error | boolean) => void; processID?: unknown };

// One 'error' listener per pool however many stores share it; it calls each store's `onError`.
const poolWatchers = new WeakMap<object, Set<(error: unknown) => void>>();
function watchPool(pool: Emitter & object, report: ((error: unknown) => void) | null) {
  let handlers = poolWatchers.get(pool);
  if (!handlers) {
    const set = new Set<(error: unknown) => void>();
    handlers = set;
    poolWatchers.set(pool, set);
    pool.on?.('error', (error: unknown) => {
      for (const h of set) h(error);
    });
  }
  if (report) handlers.add(report);
}

/** What a commit needs to find out, after a broken COMMIT, whether it happened. */
interface CommitProbe {
  userId: string;
  version: number;
  token: string;
  idempotency: { metricKey: string; key: string; eventId: string } | null;
  ledger: { kind: string; key: string; at: string; id: string } | null;
}

/** The single connection of `serial` mode, with what the store knows about its health. */
interface Session {
  q: Queryable;
  pid: number | undefined;
  broken: boolean;
}

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
  if (typeof options !== 'object' || options === null) throw new ValidationError('createPostgresStore needs options', [{ path: [], message: 'must be an object' }]);
  const schema = options.schema ?? 'laurel';
  if (typeof schema !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new ValidationError(`Invalid schema name: ${JSON.stringify(schema)}`, [{ path: ['schema'], message: 'letters, digits and _ only, 1..63 characters' }]);
  }
  const client = options.client;
  const connectFn = options.connect;
  if (connectFn !== undefined && typeof connectFn !== 'function') throw new ValidationError('connect must be a function', [{ path: ['connect'], message: 'must be a function' }]);
  if ((typeof client !== 'object' && typeof client !== 'function') || client === null || typeof client.query !== 'function') {
    if (!connectFn || client !== undefined) throw new ValidationError('createPostgresStore needs a client with query(text, params), or connect', [{ path: ['client'], message: 'must have query(text, params)' }]);
  }
  const mode = options.transactions ?? (connectFn ? 'serial' : client && typeof client.totalCount === 'number' && client.connect ? 'pool' : client?.transaction ? 'pglite' : 'serial');
  if (mode !== 'pool' && mode !== 'pglite' && mode !== 'serial') throw new ValidationError(`transactions must be pool, pglite or serial (got ${String(mode)})`, [{ path: ['transactions'], message: 'must be pool, pglite or serial' }]);
  if (options.ranks !== undefined && options.ranks !== 'sql' && options.ranks !== 'none') throw new ValidationError(`ranks must be sql or none (got ${String(options.ranks)})`, [{ path: ['ranks'], message: 'must be sql or none' }]);
  if (connectFn && mode !== 'serial') throw new ValidationError('connect is for single-connection mode (transactions: serial)', [{ path: ['connect'], message: 'only with transactions: serial' }]);
  if (mode === 'pool' && typeof client?.connect !== 'function') throw new ValidationError('transactions: pool needs a client with connect()', [{ path: ['client'], message: 'must have connect()' }]);
  if (mode === 'pglite' && typeof client?.transaction !== 'function') throw new ValidationError('transactions: pglite needs a client with transaction()', [{ path: ['client'], message: 'must have transaction()' }]);
  const verifyTimeoutMs = options.verifyTimeoutMs ?? 5_000;
  if (typeof verifyTimeoutMs !== 'number' || !Number.isFinite(verifyTimeoutMs) || verifyTimeoutMs < 0) {
    throw new ValidationError('verifyTimeoutMs must be a finite number >= 0', [{ path: ['verifyTimeoutMs'], message: 'must be a finite number >= 0' }]);
  }
  const sqlRanks = (options.ranks ?? 'sql') === 'sql';
  const t = (name: string) => `"${schema}".${name}`;
  const onError = options.onError;
  const report = (error: unknown) => {
    try {
      onError?.(error);
    } catch {
      // An observer that throws must not turn a dropped connection into a crash.
    }
  };
  if (mode === 'pool' && client && typeof (client as Emitter).on === 'function') watchPool(client as Emitter & object, onError ? report : null);

  /** The store's error for anything that is not already a Laurel error. */
  const unavailable = (method: string, error: unknown): LaurelError => storageError(`PostgreSQL store: ${method}`, error);

  // ---- Single-connection mode: one session, every use of it queued. ----
  let session: Session | null = null;
  let serialTail: Promise<unknown> = Promise.resolve();

  function adopt(q: Queryable): Session {
    const processID = (q as { processID?: unknown }).processID;
    const s: Session = { q, pid: typeof processID === 'number' ? processID : undefined, broken: false };
    const ee = q as Emitter;
    // Held for as long as the store holds the connection, which is until it is replaced; a replaced
    // connection is dead, and keeping the listener on it means a late error from it is still harmless.
    if (typeof ee.on === 'function') {
      ee.on('error', (error: unknown) => {
        s.broken = true;
        report(error);
      });
      ee.on('end', () => {
        s.broken = true;
      });
    }
    return s;
  }
  if (mode === 'serial' && client) session = adopt(client);

  /** The current connection; a broken one is replaced when `connect` is given. */
  async function currentSession(): Promise<Session> {
    if (session && (!session.broken || !connectFn)) return session;
    if (!connectFn) throw new Error('no connection');
    const old = session;
    session = null;
    if (old) {
      // Not awaited: ending a dead connection may never settle; it is being dropped anyway.
      const end = (old.q as { end?: () => unknown }).end;
      if (typeof end === 'function') {
        try {
          Promise.resolve(end.call(old.q)).catch(() => undefined);
        } catch {
          // A synchronous throw from a dead connection's end() changes nothing.
        }
      }
    }
    const q = await connectFn();
    if (typeof q !== 'object' || q === null || typeof q.query !== 'function') throw new Error('connect() did not return a connection with query(text, params)');
    // Listening before connecting: an error during or right after the handshake finds the listener.
    const fresh = adopt(q);
    const open = (q as { connect?: () => unknown }).connect;
    if (typeof open === 'function') {
      try {
        await open.call(q);
      } catch (error) {
        fresh.broken = true;
        const end = (q as { end?: () => unknown }).end;
        if (typeof end === 'function') Promise.resolve(end.call(q)).catch(() => undefined);
        throw error;
      }
    }
    session = fresh;
    return session;
  }

  /** Runs `fn` with exclusive use of the single connection. */
  function exclusive<T>(fn: (s: Session) => Promise<T>): Promise<T> {
    const run = async () => {
      const s = await currentSession();
      try {
        return await fn(s);
      } catch (error) {
        // A driver error on a reconnectable session: assume the connection is gone and open a new one next time.
        if (connectFn && !isLaurelError(error) && !isServerError(error)) s.broken = true;
        throw error;
      }
    };
    const next = serialTail.then(run, run);
    serialTail = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** A read outside any transaction (its failures are typed by the guard every method gets at the end). */
  function read<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    return mode === 'serial' ? exclusive((s) => fn(s.q)) : fn(client as Queryable);
  }

  /**
   * After a COMMIT that failed without a server verdict: whether it happened. Resolves when it did; throws
   * `StorageUnavailableError` with `committed: false` when it did not, `'unknown'` when that could not be read.
   * `reader` gives a connection to read on; `pid` is the broken connection's server process, which must be
   * gone before its transaction's outcome is final.
   */
  async function settle(method: string, cause: unknown, probe: CommitProbe, reader: () => Promise<Queryable | null>, pid: number | undefined): Promise<void> {
    const deadline = Date.now() + verifyTimeoutMs;
    let delay = 25;
    let last: unknown = cause;
    for (;;) {
      // No connection can be had at all (a single broken connection and no `connect`): nothing to wait for.
      let hopeless = false;
      try {
        const q = await reader();
        if (q === null) hopeless = true;
        else {
          const busy = pid !== undefined && Boolean((await q.query(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND pid <> pg_backend_pid()) AS busy`, [pid])).rows[0]?.busy);
          if (!busy) {
            const committed = await wasCommitted(q, probe);
            if (committed === true) return;
            if (committed === false) throw new StorageUnavailableError(`PostgreSQL store: ${method} failed: ${messageOf(cause)} (read back: not committed)`, { cause, committed: false });
            last = new Error('newer commits replaced the token and the commit left no record to look up');
            break;
          }
          last = new Error(`the broken connection's server process ${pid} is still running`);
        }
      } catch (error) {
        if (isLaurelError(error)) throw error;
        last = error;
      }
      if (hopeless || Date.now() + delay > deadline) break;
      await sleep(delay);
      delay = Math.min(delay * 2, 500);
    }
    throw new StorageUnavailableError(`PostgreSQL store: ${method} failed while committing: ${messageOf(cause)}; whether it was committed could not be read back (${messageOf(last)})`, {
      cause,
      committed: 'unknown',
    });
  }

  /** True/false: the commit happened / did not; null: cannot tell (newer commits, nothing else to look up). */
  async function wasCommitted(q: Queryable, p: CommitProbe): Promise<boolean | null> {
    const row = (await q.query(`SELECT version, commit_id FROM ${t('users')} WHERE user_id = $1`, [p.userId])).rows[0];
    const version = row ? num(row.version) : 0;
    // Each version is written by exactly one commit: below ours, ours did not happen; at ours, the token says.
    if (version < p.version) return false;
    if (version === p.version) return row?.commit_id === p.token;
    // Newer commits replaced the token: look for what ours wrote under a unique key.
    if (p.idempotency) {
      const r = await q.query(`SELECT event_id FROM ${t('idempotency')} WHERE user_id = $1 AND metric_key = $2 AND key = $3`, [p.userId, p.idempotency.metricKey, p.idempotency.key]);
      return r.rows[0] !== undefined && String(r.rows[0].event_id) === p.idempotency.eventId;
    }
    if (p.ledger) {
      const r = await q.query(`SELECT 1 FROM ${t('ledger')} WHERE user_id = $1 AND kind = $2 AND key = $3 AND at = $4 AND id = $5`, [p.userId, p.ledger.kind, p.ledger.key, p.ledger.at, p.ledger.id]);
      return r.rows.length > 0;
    }
    return null;
  }

  /**
   * A connection from the pool with `onConnError` listening for its 'error' event. The listener goes on
   * inside pg's callback, in the same tick as the pool hands the connection over: awaiting the promise would
   * leave a window in which a termination message already received with the handover finds no listener.
   */
  function checkout(onConnError: Listener): Promise<PooledConnection> {
    return new Promise<PooledConnection>((resolve, reject) => {
      let settled = false;
      const accept = (conn: unknown) => {
        if (settled) return;
        settled = true;
        const c = conn as PooledConnection;
        if (typeof c.on === 'function') c.on('error', onConnError);
        resolve(c);
      };
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        reject(error);
      };
      try {
        const connect = (client as { connect: (cb?: (err: unknown, conn: unknown) => void) => unknown }).connect;
        // pg's Pool calls the callback (and returns nothing); other pools may ignore it and return a promise.
        const returned = connect.call(client, (err, conn) => (err ? fail(err) : accept(conn)));
        if (returned && typeof (returned as Promise<unknown>).then === 'function') (returned as Promise<unknown>).then(accept, fail);
      } catch (error) {
        fail(error);
      }
    });
  }

  /**
   * Runs `fn` in a transaction. With `probe`, a failure of the COMMIT itself (not a serialization failure)
   * is settled by reading the outcome back: the result is returned if the commit happened.
   */
  async function transaction<T>(method: string, fn: (tx: Queryable) => Promise<T>, probe?: CommitProbe): Promise<T> {
    let committing = false;
    let result: T | undefined;
    const body = async (q: Queryable) => {
      result = await fn(q);
      committing = true;
      return result;
    };
    // Whether a failure needs reading back: only one during COMMIT, and not a serialization failure.
    const ambiguous = (error: unknown) => probe !== undefined && committing && !isSerialization(error);

    if (mode === 'pglite') {
      try {
        return await (client as Required<PostgresClient>).transaction(body);
      } catch (error) {
        if (!ambiguous(error)) throw error;
        await settle(method, error, probe as CommitProbe, async () => client as Queryable, undefined);
        return result as T;
      }
    }

    if (mode === 'pool') {
      // pg's Client emits 'error' when its socket drops; without a listener that would end the process.
      const onConnError: Listener = (error) => report(error);
      const conn = await checkout(onConnError);
      let released = false;
      const release = (err?: Error) => {
        if (released) return;
        released = true;
        conn.removeListener?.('error', onConnError);
        conn.release(err);
      };
      try {
        await conn.query('BEGIN');
        await body(conn);
        await conn.query('COMMIT');
        release();
        return result as T;
      } catch (error) {
        if (error instanceof ConflictError && !committing) {
          // A lost race: the connection is healthy, roll back and reuse it.
          await conn.query('ROLLBACK').then(
            () => release(),
            (e: unknown) => release(asError(e)),
          );
          throw error;
        }
        // Anything else may be a broken connection: destroy it (the server aborts an open transaction).
        release(asError(error));
        if (!ambiguous(error)) throw error;
        const pid = typeof conn.processID === 'number' ? conn.processID : undefined;
        await settle(method, error, probe as CommitProbe, async () => client as Queryable, pid);
        return result as T;
      }
    }

    return exclusive(async (s) => {
      try {
        await s.q.query('BEGIN');
        await body(s.q);
        await s.q.query('COMMIT');
        return result as T;
      } catch (error) {
        // On a live connection this ends the transaction (after a COMMIT that happened it only warns); if it
        // fails, the connection is gone.
        await s.q.query('ROLLBACK').catch(() => {
          s.broken = true;
        });
        if (!ambiguous(error)) throw error;
        // A live connection answered ROLLBACK after COMMIT, so the COMMIT's outcome is final: read it there.
        // A broken one: read on a new connection (if `connect` allows one) once its server process is gone.
        const alive = !s.broken;
        const reader = async () => (alive ? s.q : connectFn ? (await currentSession()).q : null);
        await settle(method, error, probe as CommitProbe, reader, alive ? undefined : s.pid);
        return result as T;
      }
    });
  }

  const UPSERT_ENTRY = `INSERT INTO ${t('entries')} (idx, user_id, value, neg_value, reached_at) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at`;
  // The first write of a day keeps its previous rank and value; every write sets the current ones.
  const UPSERT_HISTORY = `INSERT INTO ${t('rank_history')} (idx, user_id, date, previous_rank, rank, previous_value, value) VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value`;

  async function applyCommit(q: Queryable, c: Commit, token: string): Promise<CommitResult> {
    const version = c.expectedVersion + 1;
    // The state, the idempotency record and the ledger rows go in one statement (data-modifying CTEs): the
    // inserts run only when the versioned write matched, and the counts say which part lost a race. The
    // commit's token goes into the user's row, so that a COMMIT whose answer was lost can be read back.
    const params: unknown[] = [c.userId, JSON.stringify(c.state), token];
    const userWrite =
      c.expectedVersion === 0
        ? `INSERT INTO ${t('users')} (user_id, version, state, commit_id) VALUES ($1, 1, $2::jsonb, $3) ON CONFLICT (user_id) DO NOTHING RETURNING 1`
        : `UPDATE ${t('users')} SET version = version + 1, state = $2::jsonb, commit_id = $3 WHERE user_id = $1 AND version = $${params.push(c.expectedVersion)} RETURNING 1`;
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
          `SELECT e.value, (SELECT count(*) FROM ${t('entries')} x WHERE x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1 AS rank
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
          `WITH r AS (SELECT count(*) + 1 AS rank FROM ${t('entries')} WHERE idx = $1 AND (neg_value, reached_at, user_utf16) < ($7, $8, ${t('utf16_hex')}($2)))
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

  const methods: PostgresStore = {
    async migrate() {
      await transaction('migrate', async (q) => {
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
      const r = await read((q) => q.query(`SELECT version, state FROM ${t('users')} WHERE user_id = $1`, [userId]));
      const row = r.rows[0];
      return row ? { version: num(row.version), state: parseState(row.state) } : null;
    },

    async loadUsers(userIds) {
      if (userIds.length === 0) return [];
      const r = await read((q) => q.query(`SELECT user_id, version, state FROM ${t('users')} WHERE user_id = ANY($1::text[])`, [[...userIds]]));
      const byId = new Map(r.rows.map((row) => [String(row.user_id), row]));
      return userIds.map((id): VersionedState | null => {
        const row = byId.get(id);
        return row ? { version: num(row.version), state: parseState(row.state) } : null;
      });
    },

    async getIdempotencyRecord(userId, metricKey, key): Promise<IdempotencyRecord | null> {
      const r = await read((q) => q.query(`SELECT event_id, at FROM ${t('idempotency')} WHERE user_id = $1 AND metric_key = $2 AND key = $3`, [userId, metricKey, key]));
      const row = r.rows[0];
      return row ? { userId, metricKey, key, eventId: String(row.event_id), at: String(row.at) } : null;
    },

    async commit(c) {
      const token = globalThis.crypto.randomUUID();
      const first = c.ledger[0];
      const probe: CommitProbe = {
        userId: c.userId,
        version: c.expectedVersion + 1,
        token,
        idempotency: c.idempotency ? { metricKey: c.idempotency.metricKey, key: c.idempotency.key, eventId: c.idempotency.eventId } : null,
        ledger: first && first.userId === c.userId ? { kind: first.kind, key: first.key, at: first.at, id: first.id } : null,
      };
      try {
        return await transaction('commit', (q) => applyCommit(q, c, token), probe);
      } catch (error) {
        if (isSerialization(error)) throw new ConflictError(`Transaction conflict (${String(codeOf(error))}) for user ${JSON.stringify(c.userId)}.`, { cause: error });
        throw unavailable('commit', error);
      }
    },

    async readLedger(q: LedgerQuery) {
      const params: unknown[] = [q.userId, q.kind, q.key];
      let where = 'user_id = $1 AND kind = $2 AND key = $3';
      if (q.from !== undefined) where += ` AND at >= $${params.push(q.from)}`;
      if (q.to !== undefined) where += ` AND at < $${params.push(q.to)}`;
      const dir = q.order === 'asc' ? 'ASC' : 'DESC';
      const limit = q.limit !== undefined ? ` LIMIT $${params.push(q.limit)}` : '';
      const r = await read((db) => db.query(`SELECT id, user_id, kind, key, at, delta, total, data FROM ${t('ledger')} WHERE ${where} ORDER BY at ${dir}, seq ${dir}${limit}`, params));
      return r.rows.map(toRow);
    },

    async getEntry(index, userId) {
      // The entry and its rank in one statement.
      const r = await read((q) =>
        q.query(
          `SELECT e.user_id, e.value, e.reached_at, (SELECT count(*) FROM ${t('entries')} x WHERE x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1 AS rank
           FROM ${t('entries')} e WHERE e.idx = $1 AND e.user_id = $2`,
          [index, userId],
        ),
      );
      const row = r.rows[0];
      return row ? toEntry(row, num(row.rank)) : null;
    },

    async readRange(index, offset, limit) {
      const from = Math.max(0, offset);
      const r = await read((q) => q.query(`SELECT user_id, value, reached_at FROM ${t('entries')} WHERE idx = $1 ORDER BY neg_value, reached_at, user_utf16 OFFSET $2 LIMIT $3`, [index, from, limit]));
      return r.rows.map((row, i) => toEntry(row, from + i + 1));
    },

    async scanEntries(index, offset, limit) {
      const from = Math.max(0, offset);
      const r = await read((q) =>
        q.query(
          `SELECT e.user_id, e.value, e.reached_at, u.version FROM ${t('entries')} e JOIN ${t('users')} u ON u.user_id = e.user_id
           WHERE e.idx = $1 ORDER BY e.neg_value, e.reached_at, e.user_utf16 OFFSET $2 LIMIT $3`,
          [index, from, limit],
        ),
      );
      return r.rows.map((row, i) => ({ ...toEntry(row, from + i + 1), version: num(row.version) }));
    },

    async countEntries(index, range) {
      const params: unknown[] = [index];
      let where = 'idx = $1';
      // value >= min  <=>  neg_value <= -min;  value < max  <=>  neg_value > -max
      if (range?.min !== undefined) where += ` AND neg_value <= $${params.push(-range.min)}`;
      if (range?.max !== undefined) where += ` AND neg_value > $${params.push(-range.max)}`;
      return num((await read((q) => q.query(`SELECT count(*) AS n FROM ${t('entries')} WHERE ${where}`, params))).rows[0]?.n);
    },

    async readRankHistory(index, userId, limit): Promise<RankHistoryRow[]> {
      const r = await read((q) =>
        q.query(`SELECT date, previous_rank, rank, previous_value, value FROM ${t('rank_history')} WHERE idx = $1 AND user_id = $2 ORDER BY date DESC LIMIT $3`, [index, userId, limit]),
      );
      return r.rows.map((row) => ({ date: String(row.date), previousRank: nullableNum(row.previous_rank), rank: nullableNum(row.rank), previousValue: nullableNum(row.previous_value), value: nullableNum(row.value) }));
    },

    async getCounters(names) {
      const r = await read((q) => q.query(`SELECT name, value FROM ${t('counters')} WHERE name = ANY($1::text[])`, [[...names]]));
      const found = new Map(r.rows.map((row) => [String(row.name), num(row.value)]));
      return Object.fromEntries(names.map((n) => [n, found.get(n) ?? 0]));
    },
  };

  // Whatever any method meets that is not a Laurel error (a driver error, a dropped connection, a row that
  // does not parse) leaves it as a StorageUnavailableError with the original as `cause`.
  const guarded = {} as Record<string, unknown>;
  for (const [name, method] of Object.entries(methods) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    guarded[name] = async (...args: unknown[]) => {
      try {
        return await method(...args);
      } catch (error) {
        throw unavailable(name, error);
      }
    };
  }
  return guarded as unknown as PostgresStore;
}
