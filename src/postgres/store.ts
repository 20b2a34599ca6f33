/**
 * `createPostgresStore`: the Laurel store on PostgreSQL, over any client with `query(text, params)`: a `pg`
 * Pool in production, PGlite in tests and small apps, or one connection.
 *
 * Round trips: `loadForEvents` reads states and idempotency records in one statement; `commit` and
 * `commitBatch` are one statement each, `commit_batch(commits jsonb, ...)` (migration 003), which applies the
 * commits in order, each atomic on its own (versioned state update, idempotency record under a unique key,
 * ledger rows, leaderboard entries with ranks, rank history and thresholds, counters) and returns every
 * commit's outcome. Outside an explicit transaction one statement is one transaction: no BEGIN or COMMIT.
 *
 * Change notifications (`OutboxStore`, migration 007, PostgreSQL 13 or later): `commit_batch` and `erase_user`
 * write a commit's change events to `outbox` in the same statement. `readChanges` reads them in (xid, seq)
 * order below the oldest transaction still running, so a cursor never passes an event that commits later;
 * a transaction left open anywhere on the server (any database) holds every reader back until it ends.
 * Leases, marks, the due index, pruning and delivery outcomes take one statement per call.
 *
 * Tenants (`tenant(id)`, migration 008): every per-tenant table has a `tenant` column ('' for the default
 * tenant) that its primary key and indexes lead with; a tenant's store passes its id as a parameter of every
 * statement and function call (never in the SQL text), over the same connections, at the same round trips.
 *
 * Failures: a version or idempotency race is a `ConflictError` (as are serialization failures and
 * deadlocks); anything else any method meets (a dropped connection, a server that is down or restarting, a
 * driver error) is a `StorageUnavailableError` with the driver's error as `cause`. Broken connections are
 * discarded, so calls succeed again as soon as the server is back. A commit whose connection broke while its
 * statement was in flight (no verdict from the server) is read back, once the broken connection's server
 * process is gone, by the random token its statement wrote into the users' rows: committed means success
 * (with `ranksUnavailable`, as the ranks were in the lost answer), anything else `committed: false`, or
 * `'unknown'` if it could not be read.
 */
import { checkCounters } from '../store/counters.js';
import { ConflictError, isLaurelError, storageError, StorageUnavailableError, ValidationError, type LaurelError } from '../errors.js';
import type { ChangeEvent, IdempotencyRecord, LedgerRow, StoredChange } from '../core/types.js';
import type { BatchCommitOutcome, ChangesPage, Commit, CommitResult, DeliveryRecord, Erasure, ErasureResult, EventLoad, EventsPage, LedgerPage, LedgerQuery, OutboxStore, RankChange, RankedEntry, RankHistoryRow, Store, VersionedState } from '../store/types.js';
import type { BoostRecord } from '../core/boosts.js';
import { isMarked, isObject, settleChanges } from '../store/outbox.js';
import { instantParam } from '../core/instants.js';
import { validateText } from '../core/users.js';
import { MIGRATIONS } from './migrations.js';

/** The result shape shared by `pg` (`rowCount`) and PGlite (`affectedRows`). */
export interface QueryResult {
  rows: Record<string, unknown>[];
  rowCount?: number | null;
  affectedRows?: number;
}

/** Anything that runs a parameterised query. */
export interface Queryable {
  /** Runs `text` with `$1`-style `params` and resolves with its rows (`pg` and PGlite both have this shape). */
  query(text: string, params?: unknown[]): Promise<QueryResult>;
}

/** A `pg` Pool, a PGlite instance, or any single connection with `query`. */
export type PostgresClient = Queryable & {
  /** A `pg` Pool's `connect()`: checks out a connection for a transaction (`transactions: 'pool'`). */
  connect?: () => Promise<unknown>;
  /** PGlite's `transaction(fn)`: runs `fn` in a transaction (`transactions: 'pglite'`). */
  transaction?: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T>;
  /** A `pg` Pool's connection count: with `connect`, tells a pool from a single connection. */
  totalCount?: number;
};

/**
 * Options of {@link createPostgresStore}: the client (or a way to open connections), the schema, how
 * statements run, where ranks come from, and error reporting.
 */
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
   * How statements run. `pool`: a commit on a connection checked out of a `pg` Pool (its one statement is its
   * transaction). `pglite`: on PGlite (migrations in its `transaction()`). `serial`: on the one connection
   * given; every use of that connection (reads included) is queued, one at a time. Default: detected
   * (`serial` when `connect` is given).
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
   * How long (ms) a commit whose connection broke while its statement was in flight keeps trying to read back
   * whether it was committed, before it reports `StorageUnavailableError` with `committed: 'unknown'`
   * (default 5000).
   */
  verifyTimeoutMs?: number;
  /**
   * Whether the statements of the write path (the load with its idempotency lookup, the commit, user and
   * idempotency reads) run as named prepared statements on `pg` Pools and Clients: parsed and planned once
   * per connection instead of on every call (less server CPU per call, a smaller message each time).
   * Default `true`; other clients (PGlite, wrappers with `query(text, params)`) always get plain statements.
   * When the server refuses one before running it (it does not know it: after `DISCARD ALL`, or behind a
   * pooler that does not keep prepared statements per client, such as PgBouncer in transaction mode before
   * 1.21; or its plan's result type changed under a migration), the call sends it again as a plain statement
   * and the store (every tenant's) sends plain ones from then on. Set `false` behind such a pooler to skip
   * that first refusal.
   */
  preparedStatements?: boolean;
}

export interface PostgresStore extends Omit<Store, keyof OutboxStore | 'tenant'>, OutboxStore {
  /**
   * Creates or upgrades the schema; safe to run from many processes at once and to run again. The schema is
   * shared by every tenant: any tenant's store migrates it for all of them.
   */
  migrate(): Promise<void>;
  /**
   * One page of an index in rank order with each user's committed version: the source for rebuilding an
   * external rank index (`rebuildRankIndex`). A maintenance read: O(offset + limit). Of this store's tenant.
   */
  scanEntries(index: string, offset: number, limit: number): Promise<(RankedEntry & { version: number })[]>;
  /**
   * The store of tenant `id` (see `Store.tenant`) over the same schema, client and connection machinery (the
   * same session and serial queue in single-connection mode, the same pool): no connection of its own. Its
   * rows carry the tenant in a `tenant` column that every primary key and index leads with (migration 008);
   * the default tenant's (this store's, when it is not a tenant's) is `''`. Made once per id and kept; cheap
   * to call. Tenants do not nest: `tenant` on a tenant's store returns the sibling tenant's. `id`: 1..255
   * characters without NUL (the engine checks the length; an empty id or a NUL is a `ValidationError`).
   */
  tenant(id: string): PostgresStore;
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
/**
 * The server's verdict on a statement that failed: it was rolled back and the connection stays usable (an
 * ERROR). A fatal error (the backend is terminating, e.g. 57P01) or a driver or socket error says nothing
 * about whether an autocommitted statement committed.
 */
const isVerdict = (error: unknown) => {
  if (!isServerError(error)) return false;
  const code = String(codeOf(error));
  const severity = (error as { severity?: unknown }).severity;
  return severity !== 'FATAL' && severity !== 'PANIC' && !code.startsWith('57P') && !code.startsWith('08');
};

/**
 * Whether `q` is a `pg` Client (it has `connectionParameters`) or a `pg` Pool (its `Client` constructor and
 * `options`): drivers whose `query` takes `{ name, text, values }` and keeps named statements per connection.
 */
function isPgDriver(q: object): boolean {
  const d = q as { connectionParameters?: unknown; Client?: unknown; options?: unknown; totalCount?: unknown };
  return (typeof d.connectionParameters === 'object' && d.connectionParameters !== null) || (typeof d.Client === 'function' && typeof d.options === 'object' && typeof d.totalCount === 'number');
}

/** A `pg` driver's `query` with a query config: a named statement is prepared once per connection. */
interface NamedQueryable {
  query(config: { name: string; text: string; values: unknown[] }): Promise<QueryResult>;
}

/**
 * A server's refusal of a named statement before it ran (nothing of it happened): the statement is unknown
 * (26000), its name is taken (42P05), or its cached plan's result type changed (0A000, after a migration).
 */
function refusesPrepared(error: unknown): boolean {
  if (!isServerError(error)) return false;
  const code = codeOf(error);
  return code === '26000' || code === '42P05' || (code === '0A000' && /cached plan must not change result type/.test(messageOf(error)));
}

/** A statement of the write path with the name it is prepared under (see `hot` in createPostgresStore). */
interface HotStatement {
  text: string;
  name: string;
}

/**
 * A write-path statement, made once per store. Its name is `laurel_` and a 64-bit hash of its text (two
 * FNV-1a hashes), so that stores of different schemas or versions on one connection never give one name to
 * two texts.
 */
function hotStatement(text: string): HotStatement {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  return { text, name: `laurel_${(a >>> 0).toString(16).padStart(8, '0')}${(b >>> 0).toString(16).padStart(8, '0')}` };
}

const MAX_SEQ = 2n ** 63n - 1n;
/** A `readUserLedger` cursor of this store: a seq (decimal), '0' before the first row. */
function seqCursorOf(after: string | undefined): string {
  if (after === undefined) return '0';
  if (typeof after !== 'string' || !/^(?:0|[1-9][0-9]{0,18})$/.test(after) || BigInt(after) > MAX_SEQ) {
    throw new ValidationError(`Invalid ledger cursor: ${JSON.stringify(after)}`, [{ path: ['after'], message: 'must be a cursor returned by readUserLedger' }]);
  }
  return after;
}

/**
 * A `readEvents` cursor of this store: the last row read, as `seq|at|key` (its seq, instant and metric key,
 * its place in the order at DESC, key DESC, seq DESC).
 */
function eventCursorOf(before: string | undefined): { seq: string; at: string; key: string } | null {
  if (before === undefined) return null;
  const m = typeof before === 'string' ? /^([1-9][0-9]{0,18})\|([^|]{1,64})\|([^]*)$/.exec(before) : null;
  if (!m || BigInt(m[1] as string) > MAX_SEQ) {
    throw new ValidationError(`Invalid events cursor: ${JSON.stringify(before)}`, [{ path: ['before'], message: 'must be a cursor returned by readEvents' }]);
  }
  return { seq: m[1] as string, at: m[2] as string, key: m[3] as string };
}

const MAX_XID8 = 2n ** 64n - 1n;
/**
 * A `readChanges` cursor of this store: an event's place in the outbox, `<xid>.<seq>` (its transaction's id
 * and its sequence number, both decimal); '0.0' before the first event.
 */
function changeCursorOf(after: string | undefined): { xid: string; seq: string } {
  if (after === undefined) return { xid: '0', seq: '0' };
  const m = typeof after === 'string' ? /^(0|[1-9][0-9]{0,19})\.(0|[1-9][0-9]{0,18})$/.exec(after) : null;
  if (!m || BigInt(m[1] as string) > MAX_XID8 || BigInt(m[2] as string) > MAX_SEQ) {
    throw new ValidationError(`Invalid change cursor: ${JSON.stringify(after)}`, [{ path: ['after'], message: 'must be a cursor returned by readChanges' }]);
  }
  return { xid: m[1] as string, seq: m[2] as string };
}

/** An instant as `toISOString` writes it: stored instants compare as text ("C" order), so they must share one form. */
const isoOf = (ms: number) => new Date(ms).toISOString();
/** A due instant as stored: `toISOString`'s form when it parses (else as given). */
const dueOf = (due: string) => {
  const ms = Date.parse(due);
  return Number.isFinite(ms) ? isoOf(ms) : due;
};

/**
 * An event `commit_batch` settles (`isMarked`: its marker an object, as the function tests it) whose payload
 * is there but not an object (see {@link wireCommit}).
 */
const oddPayload = (e: ChangeEvent): boolean => isMarked(e) && e.payload !== undefined && !isObject(e.payload);

/**
 * A commit as `commit_batch` takes it: due instants in toISOString's form, and, when the function settles
 * rank events (`settles`: SQL ranks), a marked event's payload that is there but not an object (null, an
 * array, text, a number) sent as {}. The function settles a marked event by concatenating `{leaderboard}`
 * onto its payload, which makes an array of anything but an object; the memory store reads such a payload as
 * {}, and so every store reads it alike.
 */
function wireCommit<C extends Pick<Commit, 'due' | 'changes'>>(c: C, settles: boolean): C {
  const due = typeof c.due === 'string' ? dueOf(c.due) : c.due;
  const odd = settles && Array.isArray(c.changes) && c.changes.some(oddPayload);
  if (due === c.due && !odd) return c;
  const out = { ...c, due };
  if (odd) out.changes = (c.changes as ChangeEvent[]).map((e) => (oddPayload(e) ? { ...e, payload: {} } : e));
  return out;
}

const DOLLAR_TAG = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/;
/**
 * Splits a migration into statements at semicolons outside quotes, dollar quotes (function bodies) and
 * comments; pieces that hold only comments are dropped.
 */
function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  const skipTo = (needle: string, from: number) => {
    const end = sql.indexOf(needle, from);
    return end < 0 ? sql.length : end + needle.length;
  };
  while (i < sql.length) {
    const ch = sql[i];
    if (ch === '-' && sql[i + 1] === '-') i = skipTo('\n', i);
    else if (ch === "'" || ch === '"') i = skipTo(ch, i + 1); // a doubled quote reads as two quoted pieces
    else if (ch === '$' && DOLLAR_TAG.test(sql.slice(i, i + 64))) {
      const tag = (DOLLAR_TAG.exec(sql.slice(i, i + 64)) as RegExpExecArray)[0];
      i = skipTo(tag, i + tag.length);
    } else {
      if (ch === ';') {
        out.push(sql.slice(start, i));
        start = i + 1;
      }
      i++;
    }
  }
  out.push(sql.slice(start));
  return out.map((st) => st.trim()).filter((st) => st.replace(/^\s*--.*$/gm, '').trim() !== '');
}

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

/** What a commit needs to find out, after its statement's answer was lost, whether it was applied. */
interface CommitProbe {
  userId: string;
  version: number;
  idempotency: { metricKey: string; key: string; eventId: string } | null;
  ledger: { kind: string; key: string; at: string; id: string } | null;
}

/** The single connection of `serial` mode, with what the store knows about its health. */
/** Per commit of a statement whose answer was lost: applied, not applied, or cannot tell (null). */
type Applied = (boolean | null)[];

/** One commit's outcome as `commit_batch` returns it (values as text; see migration 003). */
type SqlOutcome = { conflict: 'version' | 'idempotency' } | { ranks: [number | null, number | null, string | null, string | null][] };

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
  if (options.preparedStatements !== undefined && typeof options.preparedStatements !== 'boolean') {
    throw new ValidationError('preparedStatements must be a boolean', [{ path: ['preparedStatements'], message: 'must be true or false' }]);
  }
  // Cleared for good (by every tenant's store: they share it) once the server shows that it does not keep
  // this store's prepared statements.
  let prepared = options.preparedStatements ?? true;
  /**
   * Runs a statement of the write path: named (prepared once per connection) on `pg`, plain elsewhere. A
   * server that refuses a named statement before running it (it does not know it, after a DISCARD ALL or
   * behind a pooler in transaction mode; it knows the name already; a cached plan whose result type changed
   * under a migration) gets the statement again as a plain one, and this store sends plain ones from then on.
   */
  const hot = async (q: Queryable, statement: HotStatement, params: unknown[]): Promise<QueryResult> => {
    if (!prepared || !isPgDriver(q)) return q.query(statement.text, params);
    try {
      return await (q as unknown as NamedQueryable).query({ name: statement.name, text: statement.text, values: params });
    } catch (error) {
      if (!refusesPrepared(error)) throw error;
      prepared = false;
      return q.query(statement.text, params);
    }
  };
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
      // A client knows its server process only once connected (pg.Client's processID is null before): read
      // now, so that a broken connection's statement is waited out before its outcome is read back.
      const processID = (q as { processID?: unknown }).processID;
      if (typeof processID === 'number') fresh.pid = processID;
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
   * After a commit statement that failed without a server verdict: whether it was committed. Resolves with
   * what each commit of it did when it was committed; throws `StorageUnavailableError` with
   * `committed: false` when it was not, `'unknown'` when that could not be read. `reader` gives a connection
   * to read on; `pid` is the broken connection's server process, which must be gone before its
   * transaction's outcome is final.
   */
  async function settle(method: string, cause: unknown, check: (q: Queryable) => Promise<Applied>, reader: () => Promise<Queryable | null>, pid: number | undefined): Promise<Applied> {
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
            const applied = await check(q);
            if (applied.includes(true)) return applied;
            if (applied.every((a) => a === false)) throw new StorageUnavailableError(`PostgreSQL store: ${method} failed: ${messageOf(cause)} (read back: not committed)`, { cause, committed: false });
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

  /**
   * Which commits of a statement that wrote `token` are applied: true/false, or null when that cannot be told
   * (newer commits replaced the token and the commit left nothing to look up under a unique key). Any true
   * means the statement committed; all false, that nothing of it is stored.
   */
  async function readBack(q: Queryable, probes: readonly CommitProbe[], token: string, tenant: string): Promise<Applied> {
    const ids = [...new Set(probes.map((p) => p.userId))];
    const rows = (await q.query(`SELECT user_id, version, commit_id FROM ${t('users')} WHERE tenant = $2 AND user_id = ANY($1::text[])`, [ids, tenant])).rows;
    const byId = new Map(rows.map((row) => [String(row.user_id), row]));
    const applied: Applied = [];
    for (const p of probes) {
      const row = byId.get(p.userId);
      const version = row ? num(row.version) : 0;
      // Each version is written by exactly one commit: below ours, ours was not applied; at ours, the token says.
      if (version < p.version) applied.push(false);
      else if (version === p.version) applied.push(row?.commit_id === token);
      else if (p.idempotency) {
        // Newer commits replaced the token: look for what ours wrote under a unique key.
        const r = await q.query(`SELECT event_id FROM ${t('idempotency')} WHERE tenant = $4 AND user_id = $1 AND metric_key = $2 AND key = $3`, [p.userId, p.idempotency.metricKey, p.idempotency.key, tenant]);
        applied.push(r.rows[0] !== undefined && String(r.rows[0].event_id) === p.idempotency.eventId);
      } else if (p.ledger) {
        const r = await q.query(`SELECT 1 FROM ${t('ledger')} WHERE tenant = $6 AND user_id = $1 AND kind = $2 AND key = $3 AND at = $4 AND id = $5`, [
          p.userId,
          p.ledger.kind,
          p.ledger.key,
          p.ledger.at,
          p.ledger.id,
          tenant,
        ]);
        applied.push(r.rows.length > 0);
      } else applied.push(null);
    }
    return applied;
  }

  /**
   * Whether an erasure whose answer was lost committed (see {@link readBack}). A reset stores the user again at
   * the next version under the statement's token: found so (or by its first ledger row under newer commits),
   * it committed. Not erased: the user's row still the one the erasure was read at (`commitBefore`, the commit
   * id of that version's row; undefined when there was no such row, which the erasure then refuses). Anything
   * else (the user gone, or created again since) can be this erasure or another one: unknown.
   */
  async function erasureReadBack(q: Queryable, e: Erasure, token: string, tenant: string, commitBefore: string | null | undefined): Promise<Applied> {
    if (e.reset) {
      const first = e.reset.ledger[0];
      const [applied] = await readBack(q, [{ userId: e.userId, version: e.expectedVersion + 1, idempotency: null, ledger: first && first.userId === e.userId ? { kind: first.kind, key: first.key, at: first.at, id: first.id } : null }], token, tenant);
      if (applied === true) return [true];
    }
    // Erasing an absent user (version 0) writes nothing; nor does an erasure of a version that was not there.
    if (e.expectedVersion === 0 || commitBefore === undefined) return [false];
    const row = (await q.query(`SELECT version, commit_id FROM ${t('users')} WHERE tenant = $2 AND user_id = $1`, [e.userId, tenant])).rows[0];
    // An erasure whose user is gone went through (only an erasure removes the row; one that another call made
    // at the same version left the same store behind, and one at a later version erased the user all the same).
    if (row === undefined && !e.reset) return [true];
    const same = row !== undefined && num(row.version) === e.expectedVersion && ((row.commit_id as string | null) ?? null) === commitBefore;
    return [same ? false : null];
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
   * A pooled connection with the store's 'error' listener on it (pg's Client emits 'error' when its socket
   * drops; without a listener that would end the process), and `release`, which takes the listener off and
   * hands the connection back (destroyed when given an error).
   */
  async function lease(): Promise<{ conn: PooledConnection; release: (err?: Error) => void }> {
    const onConnError: Listener = (error) => report(error);
    const conn = await checkout(onConnError);
    const release = (err?: Error) => {
      conn.removeListener?.('error', onConnError);
      conn.release(err);
    };
    return { conn, release };
  }

  /** Runs `fn` in a transaction (migrations). */
  async function transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    if (mode === 'pglite') return (client as Required<PostgresClient>).transaction(fn);
    if (mode === 'pool') {
      const { conn, release } = await lease();
      let result: T;
      try {
        await conn.query('BEGIN');
        result = await fn(conn);
        await conn.query('COMMIT');
      } catch (error) {
        // The connection may be broken: destroy it (the server aborts an open transaction).
        release(asError(error));
        throw error;
      }
      release();
      return result;
    }
    return exclusive(async (s) => {
      try {
        await s.q.query('BEGIN');
        const result = await fn(s.q);
        await s.q.query('COMMIT');
        return result;
      } catch (error) {
        // On a live connection this ends the transaction; if it fails, the connection is gone.
        await s.q.query('ROLLBACK').catch(() => {
          s.broken = true;
        });
        throw error;
      }
    });
  }

  // The tenant goes last (migration 008); '' is the default tenant.
  const COMMIT_BATCH = hotStatement(`SELECT ${t('commit_batch')}($1::jsonb, $2::text, $3::boolean, $4::text) AS r`);
  const LOAD_USER = hotStatement(`SELECT version, state::text AS state FROM ${t('users')} WHERE tenant = $2 AND user_id = $1`);
  // One user and at most its one idempotency lookup (every single call): one row, both found by primary key,
  // so that its prepared statement's generic plan is as good as a custom one (loadForEvents' statement for
  // many users, with arrays of unknown length, gets a generic plan that may scan).
  const LOAD_FOR_EVENT = hotStatement(`SELECT u.version, u.state::text AS state, i.event_id, i.at
                 FROM (SELECT 1) AS one
                 LEFT JOIN ${t('users')} u ON u.tenant = $4 AND u.user_id = $1
                 LEFT JOIN ${t('idempotency')} i ON i.tenant = $4 AND i.user_id = $1 AND i.metric_key = $2 AND i.key = $3`);
  const ERASE_USER = hotStatement(`SELECT ${t('erase_user')}($1::jsonb, $2::text, $3::boolean, $4::text) AS r`);
  const IDEMPOTENCY_RECORD = hotStatement(`SELECT event_id, at FROM ${t('idempotency')} WHERE tenant = $4 AND user_id = $1 AND metric_key = $2 AND key = $3`);

  /**
   * Runs a statement that writes (`commit_batch` by default, or `erase_user`): its rows, or (when its answer
   * was lost without a server verdict) what the read-back found each commit did in a statement that
   * committed. A server's verdict (an ERROR, e.g. a serialization failure) is thrown as it is.
   */
  async function runCommitStatement(method: string, params: unknown[], check: (q: Queryable) => Promise<Applied>, statement: HotStatement = COMMIT_BATCH): Promise<{ rows: QueryResult['rows'] } | { applied: Applied }> {
    if (mode === 'pglite') {
      // In PGlite's transaction(), which costs no round trip: a failure before its COMMIT is then a rollback,
      // not an unknown outcome (PGlite is in-process; its failures are rarely the server's own verdicts).
      let committing = false;
      try {
        return await (client as Required<PostgresClient>).transaction(async (tx) => {
          const r = await hot(tx, statement, params);
          committing = true;
          return { rows: r.rows };
        });
      } catch (error) {
        if (!committing || isVerdict(error)) throw error;
        return { applied: await settle(method, error, check, async () => client as Queryable, undefined) };
      }
    }

    if (mode === 'pool') {
      const { conn, release } = await lease();
      try {
        const r = await hot(conn, statement, params);
        release();
        return { rows: r.rows };
      } catch (error) {
        if (isVerdict(error)) {
          // The statement was rolled back; the connection is healthy.
          release();
          throw error;
        }
        // The connection may be broken: destroy it (the server aborts a statement still running on it).
        release(asError(error));
        const pid = typeof conn.processID === 'number' ? conn.processID : undefined;
        return { applied: await settle(method, error, check, async () => client as Queryable, pid) };
      }
    }

    return exclusive(async (s) => {
      // A connection known to be broken (and not replaceable) is not sent the statement: nothing committed.
      if (s.broken) throw new StorageUnavailableError(`PostgreSQL store: ${method} failed: the connection is broken`, { committed: false });
      try {
        return { rows: (await hot(s.q, statement, params)).rows };
      } catch (error) {
        if (isVerdict(error)) throw error;
        // A live connection answers this only after the statement, whose outcome is then final: read it there.
        // A broken one: read on a new connection (if `connect` allows one) once its server process is gone.
        await s.q.query('SELECT 1').catch(() => {
          s.broken = true;
        });
        const alive = !s.broken;
        const reader = async () => (alive ? s.q : connectFn ? (await currentSession()).q : null);
        return { applied: await settle(method, error, check, reader, alive ? undefined : s.pid) };
      }
    });
  }

  const nullRanks = (c: Commit): RankChange[] =>
    c.leaderboard.map((w) => ({ index: w.index, userId: w.userId, previousRank: null, rank: null, previousValue: null, value: w.remove ? null : w.value }));

  const conflictOf = (c: Commit, kind: 'version' | 'idempotency'): ConflictError =>
    kind === 'idempotency' && c.idempotency
      ? new ConflictError(`Idempotency key ${JSON.stringify(c.idempotency.key)} was already used for this user and metric.`)
      : new ConflictError(`Version conflict for user ${JSON.stringify(c.userId)}: expected version ${c.expectedVersion}.`);

  /**
   * Applies `commits` with one statement. Rejects with the statement's error (a serialization failure or
   * deadlock included) or with a `StorageUnavailableError` from the read-back.
   */
  async function commitAll(method: string, commits: readonly Commit[], tenant: string): Promise<BatchCommitOutcome[]> {
    // Before anything is sent (the counters column is a bigint: a fraction would fail the whole statement),
    // named as the memory store names them: by the commit's place in a batch, a batch of one included.
    commits.forEach((c, i) => checkCounters(c.counters, method === 'commit' ? ['counters'] : ['commits', i, 'counters']));
    const token = globalThis.crypto.randomUUID();
    const probes = commits.map((c): CommitProbe => {
      const first = c.ledger[0];
      return {
        userId: c.userId,
        version: c.expectedVersion + 1,
        idempotency: c.idempotency ? { metricKey: c.idempotency.metricKey, key: c.idempotency.key, eventId: c.idempotency.eventId } : null,
        ledger: first && first.userId === c.userId ? { kind: first.kind, key: first.key, at: first.at, id: first.id } : null,
      };
    });
    // The commits go whole, `changes` and `due` included (migration 007); due instants in toISOString's form.
    const wire = commits.map((c) => wireCommit(c, sqlRanks));
    const ran = await runCommitStatement(method, [JSON.stringify(wire), token, sqlRanks, tenant], (q) => readBack(q, probes, token, tenant));
    if ('applied' in ran) {
      // Committed, but the answer with the ranks was lost: the ranks read null, as after a rank index failure.
      if (ran.applied.includes(null)) {
        throw new StorageUnavailableError(`PostgreSQL store: ${method} committed, but whether each of its commits was applied could not be read back`, { committed: 'unknown' });
      }
      return commits.map((c, i) =>
        ran.applied[i] ? { version: c.expectedVersion + 1, ranks: nullRanks(c), ranksUnavailable: true } : new ConflictError(`Commit for user ${JSON.stringify(c.userId)} was refused (read back after its connection broke).`),
      );
    }
    const raw = ran.rows[0]?.r;
    const outcomes = (typeof raw === 'string' ? JSON.parse(raw) : raw) as SqlOutcome[];
    if (!Array.isArray(outcomes) || outcomes.length !== commits.length) throw new Error(`commit_batch returned ${outcomes?.length ?? 'no'} outcomes for ${commits.length} commits`);
    return commits.map((c, i): BatchCommitOutcome => {
      const o = outcomes[i] as SqlOutcome;
      if ('conflict' in o) return conflictOf(c, o.conflict);
      return {
        version: c.expectedVersion + 1,
        ranks: c.leaderboard.map((w, j) => {
          const [previousRank, rank, previousValue, threshold] = o.ranks[j] ?? [null, null, null, null];
          const change: RankChange = { index: w.index, userId: w.userId, previousRank, rank, previousValue: nullableNum(previousValue), value: w.remove ? null : w.value };
          if (threshold !== null) change.threshold = num(threshold);
          return change;
        }),
      };
    });
  }

  const toBoost = (r: Record<string, unknown>): BoostRecord => {
    const b = (typeof r.boost === 'string' ? JSON.parse(r.boost) : r.boost) as BoostRecord;
    return { id: String(b.id), userId: String(r.user_id), pointsSystemKey: String(b.pointsSystemKey), name: String(b.name), start: String(b.start), end: b.end === null || b.end === undefined ? null : String(b.end), multiplier: Number(b.multiplier), rounding: b.rounding };
  };
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
  const toChange = (r: Record<string, unknown>): StoredChange => ({
    id: String(r.id),
    type: String(r.type) as StoredChange['type'],
    userId: r.user_id === null || r.user_id === undefined ? null : String(r.user_id),
    at: String(r.at),
    // Selected as text (see readChanges) and parsed here: a payload that is a JSON string reads as that string.
    payload: JSON.parse(String(r.payload)) as Record<string, unknown>,
    position: `${String(r.pos_xid)}.${String(r.pos_seq)}`,
  });
  const toDelivery = (r: Record<string, unknown>): DeliveryRecord => ({
    consumer: String(r.consumer),
    eventId: String(r.event_id),
    attempt: num(r.attempt),
    ok: r.ok === true,
    status: nullableNum(r.status),
    error: r.error === null || r.error === undefined ? null : String(r.error),
    at: String(r.at),
    ms: num(r.ms),
  });
  /**
   * Appends events (a JSON array, `$n`) to the outbox of the tenant `$tn` when the CTE `m` returned a row: the
   * body of a data-modifying CTE of `appendChanges`. An event id stored already (in the tenant) is not stored
   * again (as in commit_batch).
   */
  const appendEvents = (n: number, tn: number) =>
    `INSERT INTO ${t('outbox')} (tenant, id, type, user_id, at, payload)
       SELECT $${tn}, e.ev->>'id', e.ev->>'type', e.ev->>'userId', e.ev->>'at', coalesce(e.ev->'payload', '{}'::jsonb)
       FROM jsonb_array_elements($${n}::jsonb) WITH ORDINALITY AS e(ev, i) WHERE EXISTS (SELECT 1 FROM m) ORDER BY e.i
       ON CONFLICT (tenant, id) DO NOTHING`;
  // States are read as text (`state::text`): one JSON.parse gives the caller its own copy, where a driver's
  // parsed jsonb (which it might share or cache) would need a deep clone on top of the driver's own parse.
  const parseState = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : structuredClone(v));

  // ---- The stores: one per tenant ('' is the default tenant's), all over the machinery above. ----

  const views = new Map<string, PostgresStore>();
  /** The store of tenant `id`, made on first use (it allocates no storage; see `Store.tenant`). */
  const tenantStore = (id: string): PostgresStore => {
    let store = views.get(id);
    if (!store) {
      // As the engine and the memory store check it.
      validateText(id, ['tenant'], 255, { nonEmpty: true });
      views.set(id, (store = view(id)));
    }
    return store;
  };

  /**
   * The store of one tenant: every statement it sends passes `tenant` as a parameter (never in the SQL text),
   * over the same client, connection, serial queue and pool as every other tenant's store.
   */
  function view(tenant: string): PostgresStore {
    const methods: Omit<PostgresStore, 'tenant'> = {
      async migrate() {
        await transaction(async (q) => {
          // One migrator at a time across processes; the lock ends with the transaction.
          await q.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`laurel:${schema}`]);
          await q.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
          await q.query(`CREATE TABLE IF NOT EXISTS ${t('migrations')} (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
          const done = new Set((await q.query(`SELECT id FROM ${t('migrations')}`)).rows.map((r) => String(r.id)));
          for (const m of MIGRATIONS) {
            if (done.has(m.id)) continue;
            for (const statement of splitStatements(m.sql.replaceAll('{{schema}}', schema))) await q.query(statement);
            await q.query(`INSERT INTO ${t('migrations')} (id) VALUES ($1)`, [m.id]);
          }
        });
      },

      async loadUser(userId) {
        const r = await read((q) => hot(q, LOAD_USER, [userId, tenant]));
        const row = r.rows[0];
        return row ? { version: num(row.version), state: parseState(row.state) } : null;
      },

      async loadUsers(userIds) {
        if (userIds.length === 0) return [];
        const r = await read((q) => q.query(`SELECT user_id, version, state::text AS state FROM ${t('users')} WHERE tenant = $2 AND user_id = ANY($1::text[])`, [[...userIds], tenant]));
        const byId = new Map(r.rows.map((row) => [String(row.user_id), row]));
        return userIds.map((id): VersionedState | null => {
          const row = byId.get(id);
          return row ? { version: num(row.version), state: parseState(row.state) } : null;
        });
      },

      async loadForEvents(userIds, lookups): Promise<EventLoad> {
        if (userIds.length === 0 && lookups.length === 0) return { users: [], records: [] };
        const one = lookups[0];
        if (userIds.length === 1 && lookups.length <= 1 && (one === undefined || one.userId === userIds[0])) {
          const r = await read((q) => hot(q, LOAD_FOR_EVENT, [userIds[0], one?.metricKey ?? null, one?.key ?? null, tenant]));
          const row = r.rows[0];
          const user = row && row.version !== null && row.version !== undefined ? { version: num(row.version), state: parseState(row.state) } : null;
          const record = one && row && row.event_id !== null && row.event_id !== undefined ? { userId: one.userId, metricKey: one.metricKey, key: one.key, eventId: String(row.event_id), at: String(row.at) } : null;
          return { users: [user], records: one ? [record] : [] };
        }
        // States and idempotency records in one statement; each row says which slot it answers.
        const r = await read((q) =>
          q.query(
            `SELECT 0 AS part, x.n, u.version, u.state::text AS state, NULL::text AS event_id, NULL::text AS at
               FROM unnest($1::text[]) WITH ORDINALITY AS x(id, n) JOIN ${t('users')} u ON u.tenant = $5 AND u.user_id = x.id
             UNION ALL
             SELECT 1, y.n, NULL, NULL, i.event_id, i.at
               FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS y(user_id, metric_key, key, n)
               JOIN ${t('idempotency')} i ON i.tenant = $5 AND i.user_id = y.user_id AND i.metric_key = y.metric_key AND i.key = y.key`,
            [[...userIds], lookups.map((l) => l.userId), lookups.map((l) => l.metricKey), lookups.map((l) => l.key), tenant],
          ),
        );
        const users: (VersionedState | null)[] = userIds.map(() => null);
        const records: (IdempotencyRecord | null)[] = lookups.map(() => null);
        for (const row of r.rows) {
          const i = num(row.n) - 1;
          if (num(row.part) === 0) users[i] = { version: num(row.version), state: parseState(row.state) };
          else {
            const l = lookups[i] as (typeof lookups)[number];
            records[i] = { userId: l.userId, metricKey: l.metricKey, key: l.key, eventId: String(row.event_id), at: String(row.at) };
          }
        }
        return { users, records };
      },

      async getIdempotencyRecord(userId, metricKey, key): Promise<IdempotencyRecord | null> {
        const r = await read((q) => hot(q, IDEMPOTENCY_RECORD, [userId, metricKey, key, tenant]));
        const row = r.rows[0];
        return row ? { userId, metricKey, key, eventId: String(row.event_id), at: String(row.at) } : null;
      },

      async commit(c): Promise<CommitResult> {
        let outcome: BatchCommitOutcome | undefined;
        try {
          [outcome] = await commitAll('commit', [c], tenant);
        } catch (error) {
          if (isSerialization(error)) throw new ConflictError(`Transaction conflict (${String(codeOf(error))}) for user ${JSON.stringify(c.userId)}.`, { cause: error });
          throw unavailable('commit', error);
        }
        if (outcome instanceof ConflictError) throw outcome;
        return outcome as CommitResult;
      },

      async commitBatch(commits) {
        if (commits.length === 0) return [];
        try {
          return await commitAll('commitBatch', commits, tenant);
        } catch (error) {
          // A serialization failure or deadlock rolled the whole statement back: every commit was refused.
          if (isSerialization(error)) return commits.map((c) => new ConflictError(`Transaction conflict (${String(codeOf(error))}) for user ${JSON.stringify(c.userId)}.`, { cause: error }));
          throw unavailable('commitBatch', error);
        }
      },

      async readLedger(q: LedgerQuery) {
        const params: unknown[] = [tenant, q.userId, q.kind, q.key];
        let where = 'tenant = $1 AND user_id = $2 AND kind = $3 AND key = $4';
        // Instants in the stored form (toISOString's), so that they compare as instants.
        if (q.from !== undefined) where += ` AND at >= $${params.push(isoOf(instantParam('from', q.from)))}`;
        if (q.to !== undefined) where += ` AND at < $${params.push(isoOf(instantParam('to', q.to)))}`;
        const dir = q.order === 'asc' ? 'ASC' : 'DESC';
        const limit = q.limit !== undefined ? ` LIMIT $${params.push(Math.max(0, q.limit))}` : '';
        const r = await read((db) => db.query(`SELECT id, user_id, kind, key, at, delta, total, data FROM ${t('ledger')} WHERE ${where} ORDER BY at ${dir}, seq ${dir}${limit}`, params));
        return r.rows.map(toRow);
      },

      // A user's rows in commit order: seq is the ledger's insertion order, commit_batch inserts the rows of its
      // commits in order, and a user's commits are serialised by the version check on the user's row, so a
      // user's rows in seq order are in commit order. The cursor is the last row's seq. One more row than asked
      // is read, so that `next` is null exactly after the last row. O(log n + limit) on ledger_user_seq (004).
      // (The cursor column is not called seq: ORDER BY seq would then sort by its text.)
      async readUserLedger(userId, page): Promise<LedgerPage> {
        const after = seqCursorOf(page.after);
        const r = await read((q) =>
          q.query(`SELECT seq::text AS cursor, id, user_id, kind, key, at, delta, total, data FROM ${t('ledger')} WHERE tenant = $4 AND user_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT $3`, [
            userId,
            after,
            page.limit + 1,
            tenant,
          ]),
        );
        if (r.rows.length <= page.limit) return { rows: r.rows.map(toRow), next: null };
        const rows = r.rows.slice(0, page.limit);
        const last = rows[rows.length - 1];
        return { rows: rows.map(toRow), next: last ? String(last.cursor) : after };
      },

      // Ids in UTF-16 code-unit order, as utf16_hex writes them (see migration 002): O(log n + limit) on
      // users_utf16 (004). (The primary key's COLLATE "C" is UTF-8 byte order, which differs from code-unit
      // order between characters above U+FFFF and U+E000..U+FFFF.)
      async listUsers(page) {
        const hex = t('utf16_hex');
        const r = await read((q) =>
          page.after === undefined
            ? q.query(`SELECT user_id FROM ${t('users')} WHERE tenant = $2 ORDER BY ${hex}(user_id) LIMIT $1`, [Math.max(0, page.limit), tenant])
            : q.query(`SELECT user_id FROM ${t('users')} WHERE tenant = $3 AND ${hex}(user_id) > ${hex}($2::text) ORDER BY ${hex}(user_id) LIMIT $1`, [Math.max(0, page.limit), page.after, tenant]),
        );
        return r.rows.map((row) => String(row.user_id));
      },

      async getEntry(index, userId) {
        // The entry and its rank in one statement.
        const r = await read((q) =>
          q.query(
            `SELECT e.user_id, e.value, e.reached_at, (SELECT count(*) FROM ${t('entries')} x WHERE x.tenant = e.tenant AND x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1 AS rank
             FROM ${t('entries')} e WHERE e.tenant = $3 AND e.idx = $1 AND e.user_id = $2`,
            [index, userId, tenant],
          ),
        );
        const row = r.rows[0];
        return row ? toEntry(row, num(row.rank)) : null;
      },

      async readRange(index, offset, limit) {
        const from = Math.max(0, offset);
        const r = await read((q) => q.query(`SELECT user_id, value, reached_at FROM ${t('entries')} WHERE tenant = $4 AND idx = $1 ORDER BY neg_value, reached_at, user_utf16 OFFSET $2 LIMIT $3`, [index, from, limit, tenant]));
        return r.rows.map((row, i) => toEntry(row, from + i + 1));
      },

      async scanEntries(index, offset, limit) {
        const from = Math.max(0, offset);
        const r = await read((q) =>
          q.query(
            `SELECT e.user_id, e.value, e.reached_at, u.version FROM ${t('entries')} e JOIN ${t('users')} u ON u.tenant = e.tenant AND u.user_id = e.user_id
             WHERE e.tenant = $4 AND e.idx = $1 ORDER BY e.neg_value, e.reached_at, e.user_utf16 OFFSET $2 LIMIT $3`,
            [index, from, limit, tenant],
          ),
        );
        return r.rows.map((row, i) => ({ ...toEntry(row, from + i + 1), version: num(row.version) }));
      },

      async countEntries(index, range) {
        const params: unknown[] = [tenant, index];
        let where = 'tenant = $1 AND idx = $2';
        // value >= min  <=>  neg_value <= -min;  value < max  <=>  neg_value > -max
        if (range?.min !== undefined) where += ` AND neg_value <= $${params.push(-range.min)}`;
        if (range?.max !== undefined) where += ` AND neg_value > $${params.push(-range.max)}`;
        return num((await read((q) => q.query(`SELECT count(*) AS n FROM ${t('entries')} WHERE ${where}`, params))).rows[0]?.n);
      },

      async readRankHistory(index, userId, limit): Promise<RankHistoryRow[]> {
        const r = await read((q) =>
          q.query(`SELECT date, previous_rank, rank, previous_value, value FROM ${t('rank_history')} WHERE tenant = $4 AND idx = $1 AND user_id = $2 ORDER BY date DESC LIMIT $3`, [index, userId, Math.max(0, limit), tenant]),
        );
        return r.rows.map((row) => ({ date: String(row.date), previousRank: nullableNum(row.previous_rank), rank: nullableNum(row.rank), previousValue: nullableNum(row.previous_value), value: nullableNum(row.value) }));
      },

      async getCounters(names) {
        const r = await read((q) => q.query(`SELECT name, value FROM ${t('counters')} WHERE tenant = $2 AND name = ANY($1::text[])`, [[...names], tenant]));
        const found = new Map(r.rows.map((row) => [String(row.name), num(row.value)]));
        return Object.fromEntries(names.map((n) => [n, found.get(n) ?? 0]));
      },

      // One metric: ledger_range (001), its (at, seq) after the cursor. Every metric: ledger_metric_recent
      // (005), (at, key, seq) after the cursor. O(log n + limit) either way; one row more than asked is read,
      // so that `next` is null exactly after the last row. (Keys compare as bytes, COLLATE "C": code-unit order
      // for every configuration key, which is ASCII.)
      async readEvents(userId, page): Promise<EventsPage> {
        const cursor = eventCursorOf(page.before);
        const limit = Math.max(0, page.limit);
        const params: unknown[] = [tenant, userId];
        let where = `tenant = $1 AND user_id = $2 AND kind = 'metric'`;
        let order = 'at DESC, key DESC, seq DESC';
        if (page.metricKey !== undefined) {
          where += ` AND key = $${params.push(page.metricKey)}`;
          order = 'at DESC, seq DESC';
          if (cursor) {
            // Rows of this metric after the cursor: of its instant, those before it in seq (the cursor's own
            // metric), all of them (a smaller key comes later) or none (a greater key came before).
            // (Spelled (key, at, seq), in ledger_range's column order, so that only that index can seek to it.)
            const bound = page.metricKey === cursor.key ? cursor.seq : page.metricKey < cursor.key ? MAX_SEQ.toString() : '0';
            where += ` AND (key, at, seq) < ($${params.push(page.metricKey)}, $${params.push(cursor.at)}, $${params.push(bound)}::bigint)`;
          }
        } else if (cursor) {
          where += ` AND (at, key, seq) < ($${params.push(cursor.at)}, $${params.push(cursor.key)}, $${params.push(cursor.seq)}::bigint)`;
        }
        const r = await read((q) =>
          q.query(`SELECT seq::text AS cursor, id, user_id, kind, key, at, delta, total, data FROM ${t('ledger')} WHERE ${where} ORDER BY ${order} LIMIT $${params.push(limit + 1)}`, params),
        );
        const rows = r.rows.slice(0, limit);
        const last = rows[rows.length - 1];
        const next = r.rows.length > limit && last ? `${String(last.cursor)}|${String(last.at)}|${String(last.key)}` : null;
        return { rows: rows.map(toRow), next };
      },

      // Migration 006: boosts_system, O(log n + limit).
      async listBoosts(systemKey, page) {
        const limit = Math.max(0, page.limit);
        const r = await read((q) =>
          page.after === undefined
            ? q.query(`SELECT user_id, boost FROM ${t('boosts')} WHERE tenant = $3 AND system = $1 ORDER BY id LIMIT $2`, [systemKey, limit, tenant])
            : q.query(`SELECT user_id, boost FROM ${t('boosts')} WHERE tenant = $4 AND system = $1 AND id > $3 ORDER BY id LIMIT $2`, [systemKey, limit, page.after, tenant]),
        );
        return r.rows.map(toBoost);
      },

      async getBoost(id) {
        const row = (await read((q) => q.query(`SELECT user_id, boost FROM ${t('boosts')} WHERE tenant = $2 AND id = $1`, [id, tenant]))).rows[0];
        return row ? toBoost(row) : null;
      },

      // One statement (erase_user, migration 005), so one transaction; see the function for what it deletes
      // and its lock order.
      async eraseUser(erasure): Promise<ErasureResult> {
        checkCounters(erasure.counters);
        const token = globalThis.crypto.randomUUID();
        const date = erasure.reset ? erasure.reset.state.user.updated.slice(0, 10) : null;
        const reset = erasure.reset ? wireCommit(erasure.reset, sqlRanks) : erasure.reset;
        let raw: unknown;
        try {
          // The commit that wrote the user's row at the version read (each version is written by one commit): should
          // the erasure's answer be lost, it tells a user the erasure never reached from one created again since.
          // With it, the indexes the user has an entry, rank history or a removed entry in at that version (as
          // erase_user lists them): only the user's own commits change those, and each changes the version, so
          // an erasure that applies at that version takes the user out of exactly these. Should its answer be
          // lost, they are still known (an external rank index must forget the user there).
          const before = erasure.expectedVersion === 0
            ? null
            : await read((q) =>
                q.query(
                  `SELECT u.commit_id, (SELECT coalesce(array_agg(DISTINCT s.i ORDER BY s.i), '{}') FROM (
                     SELECT x.idx FROM ${t('entries')} x WHERE x.tenant = $2 AND x.user_id = $1
                     UNION ALL SELECT x.idx FROM ${t('rank_history')} x WHERE x.tenant = $2 AND x.user_id = $1
                     UNION ALL SELECT x.idx FROM ${t('entry_removals')} x WHERE x.tenant = $2 AND x.user_id = $1) AS s(i)) AS idxs
                   FROM ${t('users')} u WHERE u.tenant = $2 AND u.user_id = $1 AND u.version = $3`,
                  [erasure.userId, tenant, erasure.expectedVersion],
                ),
              );
          const commitBefore = before?.rows[0] === undefined ? undefined : ((before.rows[0].commit_id as string | null) ?? null);
          // As a commit: an answer lost without the server's verdict is read back, not taken for a failure.
          const ran = await runCommitStatement('eraseUser', [JSON.stringify({ ...erasure, reset, date }), token, sqlRanks, tenant], (q) => erasureReadBack(q, erasure, token, tenant, commitBefore), ERASE_USER);
          if ('applied' in ran) {
            // Applied (read back): at the version read above, so with the indexes read with it.
            const held = before?.rows[0]?.idxs;
            if (!Array.isArray(held)) throw new StorageUnavailableError(`PostgreSQL store: eraseUser committed, but its answer was lost (the indexes the user was taken out of are not known)`, { committed: 'unknown' });
            raw = { erased: true, version: erasure.reset ? erasure.expectedVersion + 1 : 0, indexes: held.map(String) };
          } else raw = ran.rows[0]?.r;
        } catch (error) {
          if (isSerialization(error)) throw new ConflictError(`Transaction conflict (${String(codeOf(error))}) erasing user ${JSON.stringify(erasure.userId)}.`, { cause: error });
          throw unavailable('eraseUser', error);
        }
        const out = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { conflict?: string; erased?: boolean; version?: number; indexes?: string[] } | null;
        if (!out || typeof out !== 'object') throw new Error('erase_user returned no result');
        if (out.conflict) throw new ConflictError(`Version conflict for user ${JSON.stringify(erasure.userId)}: expected version ${erasure.expectedVersion}.`);
        const indexes = (out.indexes ?? []).map(String).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        return { erased: out.erased === true, version: num(out.version ?? 0), indexes };
      },

      // ---- The outbox (OutboxStore, migration 007). Instants come from the caller, never the server's clock. ----

      // Commit order as it can be read for sure: `read_changes` (migration 007) returns (xid, seq) order below a
      // horizon no outbox row can appear under later (it waits only for outbox writers in flight, never for
      // unrelated transactions on the server), so no row is ever found before a cursor already handed out.
      // An index range scan on the primary key (xid, seq): O(log n + limit), plus a look at pg_locks.
      async readChanges(page): Promise<ChangesPage> {
        const from = changeCursorOf(page.after);
        const limit = Math.max(0, page.limit);
        const r = await read((q) => q.query(`SELECT pos_xid, pos_seq, id, type, user_id, at, payload::text AS payload FROM ${t('read_changes')}($1::xid8, $2::bigint, $3::integer, $4::text)`, [from.xid, from.seq, limit, tenant]));
        const events = r.rows.map(toChange);
        const last = events[events.length - 1];
        return { events, next: last ? last.position : (page.after ?? '0.0') };
      },

      // One statement: taken when nobody holds the lease, the owner holds it, or it ended at or before `now`.
      async claimConsumer(lease) {
        const now = instantParam('now', lease.now);
        const r = await read((q) =>
          q.query(
            `INSERT INTO ${t('consumers')} AS k (tenant, name, cursor, owner, lease_until) VALUES ($5, $1, NULL, $2, $4::timestamptz)
             ON CONFLICT (tenant, name) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
               WHERE k.owner IS NULL OR k.owner = EXCLUDED.owner OR k.lease_until IS NULL OR k.lease_until <= $3::timestamptz
             RETURNING k.cursor`,
            [lease.consumer, lease.owner, isoOf(now), isoOf(now + lease.leaseMs), tenant],
          ),
        );
        const row = r.rows[0];
        return row ? { cursor: row.cursor === null || row.cursor === undefined ? null : String(row.cursor) } : null;
      },

      async advanceConsumer(update) {
        const until = instantParam('now', update.now) + update.leaseMs;
        const r = await read((q) =>
          q.query(`UPDATE ${t('consumers')} SET cursor = $3, lease_until = $4::timestamptz WHERE tenant = $5 AND name = $1 AND owner = $2 RETURNING 1 AS ok`, [
            update.consumer,
            update.owner,
            update.cursor,
            isoOf(until),
            tenant,
          ]),
        );
        return r.rows.length > 0;
      },

      async releaseConsumer(lease) {
        await read((q) => q.query(`UPDATE ${t('consumers')} SET owner = NULL, lease_until = NULL WHERE tenant = $3 AND name = $1 AND owner = $2`, [lease.consumer, lease.owner, tenant]));
      },

      async getMarks(marks) {
        if (marks.length === 0) return {};
        const r = await read((q) => q.query(`SELECT mark, value FROM ${t('marks')} WHERE tenant = $2 AND mark = ANY($1::text[])`, [[...marks], tenant]));
        const found = new Map(r.rows.map((row) => [String(row.mark), String(row.value)]));
        const out: Record<string, string> = {};
        for (const m of marks) {
          const v = found.get(m);
          if (v !== undefined) out[m] = v;
        }
        return out;
      },

      // One statement: the mark is inserted (expected null: ON CONFLICT DO NOTHING) or updated from `expected`
      // (WHERE value = expected), and the events appended only when it was. Of concurrent callers with the same
      // `expected` exactly one wins: the others wait for its row and then find it taken or changed. Events with
      // a rank marker complete from no rank changes, so they are dropped (as in the memory store).
      async appendChanges(entry) {
        const events = JSON.stringify(settleChanges(entry.changes, [], ''));
        const r = await read((q) =>
          entry.expected === null
            ? q.query(
                `WITH m AS (INSERT INTO ${t('marks')} (tenant, mark, value) VALUES ($4, $1, $2) ON CONFLICT (tenant, mark) DO NOTHING RETURNING 1), ins AS (${appendEvents(3, 4)})
                 SELECT count(*) AS n FROM m`,
                [entry.mark, entry.value, events, tenant],
              )
            : q.query(
                `WITH m AS (UPDATE ${t('marks')} SET value = $2 WHERE tenant = $5 AND mark = $1 AND value = $4 RETURNING 1), ins AS (${appendEvents(3, 5)})
                 SELECT count(*) AS n FROM m`,
                [entry.mark, entry.value, events, entry.expected, tenant],
              ),
        );
        return num(r.rows[0]?.n) > 0;
      },

      // One statement on users_due (007): the earliest due users, skipping rows other transactions hold (a
      // commit of the user, another claim), each given `now + leaseMs` as its due instant. O(log n + limit).
      async claimDue(claim) {
        const now = instantParam('now', claim.now);
        const limit = Math.max(0, claim.limit);
        if (limit === 0) return [];
        const r = await read((q) =>
          q.query(
            `WITH d AS (
               SELECT user_id, due FROM ${t('users')} WHERE tenant = $4 AND due IS NOT NULL AND due <= $1 ORDER BY due, user_id LIMIT $3 FOR UPDATE SKIP LOCKED
             ), up AS (
               UPDATE ${t('users')} x SET due = $2 FROM d WHERE x.tenant = $4 AND x.user_id = d.user_id RETURNING x.user_id
             )
             SELECT d.user_id FROM d JOIN up ON up.user_id = d.user_id ORDER BY d.due, d.user_id`,
            [isoOf(now), isoOf(now + claim.leaseMs), limit, tenant],
          ),
        );
        return r.rows.map((row) => String(row.user_id));
      },

      // The oldest events dated before `before` (outbox_at), at most `limit`; delivery outcomes dated before it
      // go too (at most `limit` of them), so that table stays bounded as well. Returns the events removed.
      async pruneChanges(prune) {
        const before = isoOf(instantParam('before', prune.before));
        const limit = Math.max(0, prune.limit);
        if (limit === 0) return 0;
        const r = await read((q) =>
          q.query(
            // The oldest events in commit order, up to the first one dated at or after `before` (so an event
            // written late but dated long ago, a lapse seen weeks after, is never pruned before newer ones).
            `WITH head AS (
               SELECT h.xid, h.seq, h.at, row_number() OVER (ORDER BY h.xid, h.seq) AS n
                 FROM (SELECT xid, seq, at FROM ${t('outbox')} WHERE tenant = $3 ORDER BY xid, seq LIMIT $2) h
             ), stop AS (SELECT coalesce(min(n), $2 + 1) AS n FROM head WHERE at >= $1),
             gone AS (
               DELETE FROM ${t('outbox')} o USING head
               WHERE o.tenant = $3 AND o.xid = head.xid AND o.seq = head.seq AND head.n < (SELECT n FROM stop) RETURNING 1
             ), gone_deliveries AS (
               DELETE FROM ${t('deliveries')} WHERE seq IN (SELECT seq FROM ${t('deliveries')} WHERE tenant = $3 AND at < $1 ORDER BY at, seq LIMIT $2)
             )
             SELECT count(*) AS n FROM gone`,
            [before, limit, tenant],
          ),
        );
        return num(r.rows[0]?.n);
      },

      async recordDeliveries(records) {
        if (records.length === 0) return;
        await read((q) =>
          q.query(
            `INSERT INTO ${t('deliveries')} (tenant, consumer, event_id, attempt, ok, status, error, at, ms)
               SELECT $2, r.consumer, r."eventId", r.attempt, r.ok, r.status, r.error, r.at, r.ms
               FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (consumer text, "eventId" text, attempt integer, ok boolean, status integer, error text, at text, ms double precision)) WITH ORDINALITY AS r
               ORDER BY r.ordinality`,
            [JSON.stringify(records), tenant],
          ),
        );
      },

      async readDeliveries(query) {
        const limit = Math.max(0, query.limit);
        const r = await read((q) =>
          q.query(`SELECT consumer, event_id, attempt, ok, status, error, at, ms FROM ${t('deliveries')} WHERE tenant = $3 AND consumer = $1 ORDER BY seq DESC LIMIT $2`, [query.consumer, limit, tenant]),
        );
        return r.rows.map(toDelivery);
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
    guarded.tenant = tenantStore;
    return guarded as unknown as PostgresStore;
  }

  return view('');
}
