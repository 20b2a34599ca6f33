/**
 * A reference SQLite adapter (better-sqlite3) of the core {@link Store} contract, kept in the test tree to
 * measure the conformance suite: `createSqliteStore({ mutant })` injects one plausible adapter bug (see
 * {@link MUTANTS}), and `npm run test:mutation` (test/sqlite/mutation.ts) requires the suite to catch every
 * one while passing the clean adapter. It calls the suite's fault hook (`faults.point(label)`) before each
 * statement of `commit`, `commitBatch` and `eraseUser`, so the suite's atomicity checks apply to it.
 *
 * Layout: one table per kind of data; ledger rows carry a global `seq` (insertion order: ties at one instant,
 * commit order for `readUserLedger`); ids and keys that order in code-unit order (user ids, metric keys,
 * boost ids) carry a `*_cu` column holding their UTF-16 code units in hex, which SQLite's byte order (BINARY
 * collation) then orders as JavaScript's `<` does. Instants are compared as epoch milliseconds. Writes run in
 * one transaction per call (`db.transaction`), synchronously: no two writes interleave in this process.
 *
 * Tenants (`tenant(id)`), the PostgreSQL store's way (migration 008): every table has a `tenant` column ('' for
 * the default tenant) that its primary key and every index lead with, and every statement binds the store's
 * tenant as the parameter `@tenant` (never in the SQL text). A tenant's store is made once per id, over the
 * same database handle; `tenant` on a tenant's store returns the sibling tenant's (tenants do not nest).
 * Not part of the package. The optional outbox (`OutboxStore`) is left out.
 */
import Database from 'better-sqlite3';
import { ConflictError, ValidationError } from '../../src/index.js';
import type {
  BatchCommitOutcome,
  BoostRecord,
  Commit,
  CommitResult,
  Erasure,
  ErasureResult,
  IdempotencyRecord,
  LeaderboardWrite,
  LedgerRow,
  RankChange,
  RankedEntry,
  RankHistoryRow,
  Store,
  VersionedState,
} from '../../src/index.js';
import type { FaultInjector } from '../../src/testing/index.js';

/**
 * The bugs `createSqliteStore` can inject, each one a mistake an adapter author could plausibly make, by name
 * with what it does. The conformance suite must catch every one (`npm run test:mutation`).
 */
export const MUTANTS = {
  'unranked-dropped': 'leaderboard writes marked `unranked` are not stored (points totals never reach the index)',
  'count-max-inclusive': 'countEntries counts `value <= max` instead of `value < max`',
  'count-min-exclusive': 'countEntries counts `value > min` instead of `value >= min`',
  'ledger-ties-reversed': 'readLedger orders rows of one instant newest first in ascending reads (and oldest first in descending ones)',
  'commit-not-atomic': 'commit and commitBatch run their statements outside a transaction',
  'erase-not-atomic': 'eraseUser runs its statements outside a transaction',
  'ledger-to-inclusive': 'readLedger includes rows at `to` (`at <= to`)',
  'ledger-from-exclusive': 'readLedger leaves out rows at `from` (`at > from`)',
  'tie-later-first': 'equal values rank the later reachedAt first',
  'tie-user-bytes': 'equal values and instants rank user ids in UTF-8 byte order, not code-unit order',
  'no-version-check': 'commit does not compare the stored version with expectedVersion (last writer wins)',
  'idempotency-not-per-user': 'idempotency records are unique per (metric, key) across users, and read without the user',
  'erase-counters-ignored': 'eraseUser does not apply its counter increments',
  'history-previous-overwritten': 'every write of a day overwrites the rank-history row\'s previousRank/previousValue',
  'erase-boosts-kept': 'eraseUser leaves the user\'s runtime boosts',
  'events-cursor-skips': 'readEvents reads one row past the page to see if there are more, and puts the cursor after that row',
  'list-users-bytes': 'listUsers orders (and pages) ids in UTF-8 byte order, not code-unit order',
  'range-rank-offset': 'readRange numbers ranks from the page (1 for the first row of every page), not from the index',
  'rank-history-oldest': 'readRankHistory returns the oldest rows instead of the latest (ORDER BY date ASC LIMIT n)',
  'batch-refusal-not-sticky': 'commitBatch goes on applying a refused user\'s later commits whose expected version matches',
  'erase-history-kept': 'eraseUser leaves the user\'s rank history',
  'remove-keeps-zero': 'a leaderboard write with `remove: true` stores value 0 instead of deleting the entry',
  'counters-overwrite': 'counter increments overwrite the counter instead of adding to it',
  'ledger-next-on-full-page': 'readUserLedger returns a next cursor whenever a page is full, even with no more rows',
  'boosts-after-inclusive': 'listBoosts includes the boost `after` itself',
  'events-key-ascending': 'readEvents orders rows of one instant by metric key ascending',
  'erase-prefix': 'eraseUser deletes with `LIKE userId || \'%\'`: users whose id starts with the erased id lose their data too',
  'readrange-limit-off-by-one': 'readRange returns limit + 1 entries',
  'idempotency-ignored-duplicate': 'a commit reusing an idempotency key succeeds (INSERT OR IGNORE) instead of conflicting',
  'reset-keeps-ledger': 'eraseUser with reset keeps the user\'s old ledger rows',
  'tenant-users-unscoped': 'listUsers lists the users of every tenant (no `tenant = @tenant` condition)',
  'tenant-version-unscoped': 'the version check of commit and eraseUser reads the user id\'s version in whichever tenant comes first',
  'tenant-idempotency-unscoped': 'idempotency records are looked up without the tenant: a key used in one tenant refuses the same key in another',
  'tenant-counters-shared': 'counters are kept in the default tenant for every tenant',
  'tenant-entries-shared': 'index entries (the rank index) are kept in the default tenant for every tenant',
  'tenant-history-shared': 'rank history is kept in the default tenant for every tenant',
  'tenant-user-ledger-unscoped': 'readUserLedger reads the user id\'s rows of every tenant',
  'tenant-erase-everywhere': 'eraseUser deletes the user id\'s ledger, records, entries, history and boosts in every tenant',
  'tenant-boost-get-unscoped': 'getBoost finds a boost id in any tenant',
  'tenant-boost-delete-unscoped': 'a deleteBoost row deletes the user id\'s boost of that id in every tenant',
  'tenant-nests': 'tenant(id) on a tenant\'s store makes a nested tenant (`<tenant>/<id>`) instead of returning the sibling',
  'tenant-id-folded': 'tenant ids are compared case-insensitively (folded to lower case)',
} as const;

/** The name of an injectable bug (see {@link MUTANTS}). */
export type Mutant = keyof typeof MUTANTS;

/** Options of {@link createSqliteStore}. */
export interface SqliteStoreOptions {
  /** The database file (default: a new in-memory database). */
  filename?: string;
  /** The fault hook, called before each statement of a write (the conformance suite's `faults`). */
  faults?: FaultInjector;
  /** One injected bug (for the mutation run); none by default. */
  mutant?: Mutant;
}

/** The schema: every table leads its primary key and every index with `tenant` ('' for the default tenant). */
const SCHEMA = `
CREATE TABLE users (tenant TEXT NOT NULL, user_id TEXT NOT NULL, user_cu TEXT NOT NULL, user_bytes BLOB NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (tenant, user_id), UNIQUE (tenant, user_cu));
CREATE TABLE ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, id TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, key_cu TEXT NOT NULL, at TEXT NOT NULL, at_ms INTEGER NOT NULL, delta REAL NOT NULL, total REAL NOT NULL, data TEXT NOT NULL);
CREATE INDEX ledger_range ON ledger (tenant, user_id, kind, key, at_ms, seq);
CREATE INDEX ledger_user ON ledger (tenant, user_id, seq);
CREATE INDEX ledger_events ON ledger (tenant, user_id, kind, at_ms, key_cu, seq);
CREATE TABLE idempotency (tenant TEXT NOT NULL, user_id TEXT NOT NULL, metric_key TEXT NOT NULL, key TEXT NOT NULL, event_id TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (tenant, user_id, metric_key, key));
CREATE TABLE entries (tenant TEXT NOT NULL, idx TEXT NOT NULL, user_id TEXT NOT NULL, user_cu TEXT NOT NULL, user_bytes BLOB NOT NULL, value REAL NOT NULL, reached_at TEXT NOT NULL, reached_ms INTEGER NOT NULL, PRIMARY KEY (tenant, idx, user_id));
CREATE INDEX entries_order ON entries (tenant, idx, value DESC, reached_ms, user_cu);
CREATE INDEX entries_user ON entries (tenant, user_id);
CREATE TABLE removals (tenant TEXT NOT NULL, user_id TEXT NOT NULL, idx TEXT NOT NULL, PRIMARY KEY (tenant, user_id, idx));
CREATE TABLE history (tenant TEXT NOT NULL, idx TEXT NOT NULL, user_id TEXT NOT NULL, date TEXT NOT NULL, previous_rank INTEGER, rank INTEGER, previous_value REAL, value REAL, PRIMARY KEY (tenant, idx, user_id, date));
CREATE INDEX history_user ON history (tenant, user_id);
CREATE TABLE counters (tenant TEXT NOT NULL, name TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY (tenant, name));
CREATE TABLE boosts (tenant TEXT NOT NULL, id TEXT NOT NULL, id_cu TEXT NOT NULL, user_id TEXT NOT NULL, system TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (tenant, id));
CREATE INDEX boosts_system ON boosts (tenant, system, id_cu);
CREATE INDEX boosts_user ON boosts (tenant, user_id);
`;

/** A string's UTF-16 code units in hex, 4 digits each: byte order of these is JavaScript's `<` of the strings. */
export function codeUnitKey(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += s.charCodeAt(i).toString(16).padStart(4, '0');
  return out;
}

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const msOf = (iso: string) => Date.parse(iso);

interface LedgerRecord {
  seq: number;
  id: string;
  user_id: string;
  kind: LedgerRow['kind'];
  key: string;
  key_cu: string;
  at: string;
  at_ms: number;
  delta: number;
  total: number;
  data: string;
}

interface EntryRecord {
  user_id: string;
  user_cu: string;
  value: number;
  reached_at: string;
  reached_ms: number;
}

const rowOf = (r: LedgerRecord): LedgerRow => ({ id: r.id, userId: r.user_id, kind: r.kind, key: r.key, at: r.at, delta: r.delta, total: r.total, data: JSON.parse(r.data) as LedgerRow['data'] });

/** The reference SQLite store of one tenant (the default tenant's too): a {@link Store} with tenants and `close`. */
export interface SqliteStore extends Store {
  /** Closes the database, of every tenant: they share it. */
  close(): void;
  /**
   * The store of tenant `id` (see `Store.tenant`) over the same database handle: made once per id and kept.
   * Tenants do not nest: `tenant` on a tenant's store returns the sibling tenant's.
   */
  tenant(id: string): SqliteStore;
}

/** A prepared statement of one tenant's store: every call binds `@tenant` along with its own parameters. */
interface TenantStatement<R> {
  run(...params: unknown[]): Database.RunResult;
  get(...params: unknown[]): R | undefined;
  all(...params: unknown[]): R[];
}

/** A reference SQLite {@link Store} (see the module comment), with an optional injected bug. */
export function createSqliteStore(options: SqliteStoreOptions = {}): SqliteStore {
  const db = new Database(options.filename ?? ':memory:');
  db.pragma('journal_mode = WAL');
  db.exec(SCHEMA);
  const stores = new Map<string, SqliteStore>();
  const tenant = (id: string): SqliteStore => {
    const key = options.mutant === 'tenant-id-folded' ? id.toLowerCase() : id;
    let store = stores.get(key);
    if (!store) stores.set(key, (store = tenantStore(db, options, key, tenant)));
    return store;
  };
  return tenant('');
}

/**
 * The store of tenant `tenantId` ('' for the default tenant) over `db`; `tenant` finds or makes the sibling
 * tenants' stores.
 */
function tenantStore(db: Database.Database, options: SqliteStoreOptions, tenantId: string, tenant: (id: string) => SqliteStore): SqliteStore {
  const bug = (name: Mutant) => options.mutant === name;
  const point = (label: string) => options.faults?.point(label);
  const tx = <A extends unknown[], R>(fn: (...args: A) => R, atomic = true): ((...args: A) => R) => (atomic ? db.transaction(fn) : fn);
  /**
   * Prepares `sql` with `@tenant` bound to this store's tenant (to `as` instead: a mutant's shared table): the
   * tenant joins a trailing object of named parameters, or follows the positional ones.
   */
  const prep = <R = unknown>(sql: string, as: string = tenantId): TenantStatement<R> => {
    const s = db.prepare<unknown[], R>(sql);
    const bind = (params: unknown[]): unknown[] => {
      const last = params[params.length - 1];
      if (last !== null && typeof last === 'object' && !Buffer.isBuffer(last)) return [...params.slice(0, -1), { ...last, tenant: as }];
      return [...params, { tenant: as }];
    };
    return { run: (...params) => s.run(...bind(params)), get: (...params) => s.get(...bind(params)), all: (...params) => s.all(...bind(params)) };
  };
  // The tenant some mutants keep a table in for every tenant ('': the default tenant's).
  const countersOf = bug('tenant-counters-shared') ? '' : tenantId;
  const entriesOf = bug('tenant-entries-shared') ? '' : tenantId;
  const historyOf = bug('tenant-history-shared') ? '' : tenantId;

  // Entries order: value desc, reachedAt asc, user id by code units (or, mutated, the other ways).
  const tieUser = bug('tie-user-bytes') ? 'user_bytes' : 'user_cu';
  const tieAt = bug('tie-later-first') ? 'reached_ms DESC' : 'reached_ms';
  const before = bug('tie-later-first') ? '(value > @value OR (value = @value AND (reached_ms > @ms OR (reached_ms = @ms AND TIEUSER < @user))))' : '(value > @value OR (value = @value AND (reached_ms < @ms OR (reached_ms = @ms AND TIEUSER < @user))))';
  const stmt = {
    user: prep<{ state: string; version: number }>('SELECT state, version FROM users WHERE tenant = @tenant AND user_id = ?'),
    version: prep<{ version: number }>(`SELECT version FROM users WHERE ${bug('tenant-version-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant'} AND user_id = ? LIMIT 1`),
    insertUser: prep('INSERT INTO users (tenant, user_id, user_cu, user_bytes, state, version) VALUES (@tenant, ?, ?, ?, ?, ?)'),
    updateUser: prep('UPDATE users SET state = ?, version = ? WHERE tenant = @tenant AND user_id = ?'),
    upsertUser: prep('INSERT INTO users (tenant, user_id, user_cu, user_bytes, state, version) VALUES (@tenant, ?, ?, ?, ?, ?) ON CONFLICT (tenant, user_id) DO UPDATE SET state = excluded.state, version = excluded.version'),
    deleteUser: prep('DELETE FROM users WHERE tenant = @tenant AND user_id = ?'),
    record: prep<{ event_id: string; at: string; user_id: string }>(
      bug('idempotency-not-per-user')
        ? 'SELECT event_id, at, user_id FROM idempotency WHERE tenant = @tenant AND metric_key = @metric AND key = @key AND @user IS NOT NULL LIMIT 1'
        : `SELECT event_id, at, user_id FROM idempotency WHERE ${bug('tenant-idempotency-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant'} AND user_id = @user AND metric_key = @metric AND key = @key LIMIT 1`,
    ),
    insertRecord: prep(`INSERT ${bug('idempotency-ignored-duplicate') ? 'OR IGNORE ' : ''}INTO idempotency (tenant, user_id, metric_key, key, event_id, at) VALUES (@tenant, ?, ?, ?, ?, ?)`),
    insertRow: prep('INSERT INTO ledger (tenant, id, user_id, kind, key, key_cu, at, at_ms, delta, total, data) VALUES (@tenant, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'),
    addCounter: prep(
      bug('counters-overwrite')
        ? 'INSERT INTO counters (tenant, name, value) VALUES (@tenant, @name, @n) ON CONFLICT (tenant, name) DO UPDATE SET value = @n'
        : 'INSERT INTO counters (tenant, name, value) VALUES (@tenant, @name, @n) ON CONFLICT (tenant, name) DO UPDATE SET value = value + @n',
      countersOf,
    ),
    counter: prep<{ value: number }>('SELECT value FROM counters WHERE tenant = @tenant AND name = ?', countersOf),
    entry: prep<EntryRecord>('SELECT user_id, user_cu, value, reached_at, reached_ms FROM entries WHERE tenant = @tenant AND idx = ? AND user_id = ?', entriesOf),
    rankOf: prep<{ n: number }>(`SELECT count(*) AS n FROM entries WHERE tenant = @tenant AND idx = @idx AND ${before.replaceAll('TIEUSER', tieUser)}`, entriesOf),
    upsertEntry: prep(
      'INSERT INTO entries (tenant, idx, user_id, user_cu, user_bytes, value, reached_at, reached_ms) VALUES (@tenant, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = excluded.value, reached_at = excluded.reached_at, reached_ms = excluded.reached_ms',
      entriesOf,
    ),
    deleteEntry: prep('DELETE FROM entries WHERE tenant = @tenant AND idx = ? AND user_id = ?', entriesOf),
    nth: prep<{ value: number }>(`SELECT value FROM entries WHERE tenant = @tenant AND idx = ? ORDER BY value DESC, ${tieAt}, ${tieUser} LIMIT 1 OFFSET ?`, entriesOf),
    removal: prep('INSERT OR IGNORE INTO removals (tenant, user_id, idx) VALUES (@tenant, ?, ?)'),
    history: prep<{ previous_rank: number | null; previous_value: number | null }>('SELECT previous_rank, previous_value FROM history WHERE tenant = @tenant AND idx = ? AND user_id = ? AND date = ?', historyOf),
    insertHistory: prep('INSERT INTO history (tenant, idx, user_id, date, previous_rank, rank, previous_value, value) VALUES (@tenant, ?, ?, ?, ?, ?, ?, ?)', historyOf),
    updateHistory: prep(
      bug('history-previous-overwritten')
        ? 'UPDATE history SET previous_rank = @previousRank, previous_value = @previousValue, rank = @rank, value = @value WHERE tenant = @tenant AND idx = @idx AND user_id = @user AND date = @date'
        : 'UPDATE history SET rank = @rank, value = @value WHERE tenant = @tenant AND idx = @idx AND user_id = @user AND date = @date AND @previousRank IS @previousRank AND @previousValue IS @previousValue',
      historyOf,
    ),
    upsertBoost: prep('INSERT INTO boosts (tenant, id, id_cu, user_id, system, record) VALUES (@tenant, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET user_id = excluded.user_id, system = excluded.system, record = excluded.record'),
    deleteBoost: prep(`DELETE FROM boosts WHERE ${bug('tenant-boost-delete-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant'} AND id = ? AND user_id = ?`),
  };

  const userMatch = bug('erase-prefix') ? "user_id LIKE ? || '%'" : 'user_id = ?';
  const erasingIn = bug('tenant-erase-everywhere') ? '@tenant IS NOT NULL' : 'tenant = @tenant';
  const erasing = {
    indexes: [
      prep<{ idx: string }>(`SELECT idx FROM entries WHERE tenant = @tenant AND ${userMatch}`, entriesOf),
      prep<{ idx: string }>(`SELECT idx FROM history WHERE tenant = @tenant AND ${userMatch}`, historyOf),
      prep<{ idx: string }>(`SELECT idx FROM removals WHERE tenant = @tenant AND ${userMatch}`),
    ],
    ledger: prep(`DELETE FROM ledger WHERE ${erasingIn} AND ${userMatch}`),
    idempotency: prep(`DELETE FROM idempotency WHERE ${erasingIn} AND ${userMatch}`),
    entries: prep(`DELETE FROM entries WHERE ${erasingIn} AND ${userMatch}`, entriesOf),
    history: prep(`DELETE FROM history WHERE ${erasingIn} AND ${userMatch}`, historyOf),
    removals: prep(`DELETE FROM removals WHERE ${erasingIn} AND ${userMatch}`),
    boosts: prep(`DELETE FROM boosts WHERE ${erasingIn} AND ${userMatch}`),
  };

  const versionOf = (userId: string): number => stmt.version.get(userId)?.version ?? 0;
  const rankOf = (index: string, e: EntryRecord): number => {
    const user = bug('tie-user-bytes') ? utf8(e.user_id) : e.user_cu;
    return (stmt.rankOf.get({ idx: index, value: e.value, ms: e.reached_ms, user })?.n ?? 0) + 1;
  };

  const conflictOf = (c: Commit): ConflictError | null => {
    const current = versionOf(c.userId);
    if (current !== c.expectedVersion && !bug('no-version-check')) {
      return new ConflictError(`Version conflict for user ${JSON.stringify(c.userId)}: expected ${c.expectedVersion}, found ${current}.`);
    }
    if (c.idempotency && !bug('idempotency-ignored-duplicate') && stmt.record.get({ user: c.idempotency.userId, metric: c.idempotency.metricKey, key: c.idempotency.key })) {
      return new ConflictError(`Idempotency key ${JSON.stringify(c.idempotency.key)} was already used for this user and metric.`);
    }
    return null;
  };

  const storeState = (userId: string, state: unknown, version: number, exists: boolean): void => {
    point('write user');
    if (bug('no-version-check')) stmt.upsertUser.run(userId, codeUnitKey(userId), utf8(userId), JSON.stringify(state), version);
    else if (exists) stmt.updateUser.run(JSON.stringify(state), version, userId);
    else stmt.insertUser.run(userId, codeUnitKey(userId), utf8(userId), JSON.stringify(state), version);
  };

  const addRows = (rows: readonly LedgerRow[]): void => {
    for (const row of rows) {
      point('insert ledger row');
      stmt.insertRow.run(row.id, row.userId, row.kind, row.key, codeUnitKey(row.key), row.at, msOf(row.at), row.delta, row.total, JSON.stringify(row.data ?? null));
      if (row.kind !== 'operation') continue;
      const data = row.data as { id?: unknown; result?: { boost?: BoostRecord } } | null;
      if (row.key === 'createBoost' && data?.result?.boost) {
        const b = data.result.boost;
        const rec: BoostRecord = { id: b.id, userId: row.userId, pointsSystemKey: b.pointsSystemKey, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding };
        point('upsert boost');
        stmt.upsertBoost.run(b.id, codeUnitKey(b.id), row.userId, b.pointsSystemKey, JSON.stringify(rec));
      } else if (row.key === 'deleteBoost' && typeof data?.id === 'string') {
        point('delete boost');
        stmt.deleteBoost.run(data.id, row.userId);
      }
    }
  };

  const addCounters = (counters: Record<string, number>): void => {
    for (const [name, n] of Object.entries(counters)) {
      point('add counter');
      stmt.addCounter.run({ name, n });
    }
  };

  /** Applies leaderboard writes in order: entries, rank history; their rank changes. */
  const writeEntries = (writes: readonly LeaderboardWrite[]): RankChange[] => {
    const ranks: RankChange[] = [];
    for (const w of writes) {
      const ranked = w.unranked !== true;
      if (!ranked && !w.remove && bug('unranked-dropped')) {
        ranks.push({ index: w.index, userId: w.userId, previousRank: null, rank: null, previousValue: null, value: null });
        continue;
      }
      const old = stmt.entry.get(w.index, w.userId);
      const previousRank = old && ranked ? rankOf(w.index, old) : null;
      if (w.remove) {
        point('record removal');
        stmt.removal.run(w.userId, w.index);
        if (bug('remove-keeps-zero')) {
          if (old) {
            point('zero entry');
            stmt.upsertEntry.run(w.index, w.userId, codeUnitKey(w.userId), utf8(w.userId), 0, old.reached_at, old.reached_ms);
          }
        } else {
          point('delete entry');
          stmt.deleteEntry.run(w.index, w.userId);
        }
      } else {
        point('upsert entry');
        stmt.upsertEntry.run(w.index, w.userId, codeUnitKey(w.userId), utf8(w.userId), w.value, w.reachedAt, msOf(w.reachedAt));
      }
      const now = stmt.entry.get(w.index, w.userId);
      const change: RankChange = {
        index: w.index,
        userId: w.userId,
        previousRank,
        rank: now && ranked ? rankOf(w.index, now) : null,
        previousValue: old ? old.value : null,
        value: now ? now.value : null,
      };
      if (w.remove && bug('remove-keeps-zero')) change.value = null;
      if (w.thresholdRank !== undefined) change.threshold = stmt.nth.get(w.index, w.thresholdRank - 1)?.value ?? 0;
      ranks.push(change);
      if (!ranked) continue;
      const day = stmt.history.get(w.index, w.userId, w.date);
      point('write rank history');
      if (day) stmt.updateHistory.run({ idx: w.index, user: w.userId, date: w.date, previousRank, previousValue: change.previousValue, rank: change.rank, value: change.value });
      else stmt.insertHistory.run(w.index, w.userId, w.date, previousRank, change.rank, change.previousValue, change.value);
    }
    return ranks;
  };

  const apply = (c: Commit): CommitResult => {
    const version = c.expectedVersion + 1;
    storeState(c.userId, c.state, version, c.expectedVersion > 0);
    if (c.idempotency) {
      point('insert idempotency record');
      stmt.insertRecord.run(c.idempotency.userId, c.idempotency.metricKey, c.idempotency.key, c.idempotency.eventId, c.idempotency.at);
    }
    addRows(c.ledger);
    addCounters(c.counters);
    return { version, ranks: writeEntries(c.leaderboard) };
  };

  const commitOne = tx((c: Commit): CommitResult => {
    point('read version');
    const conflict = conflictOf(c);
    if (conflict) throw conflict;
    return apply(c);
  }, !bug('commit-not-atomic'));

  const commitMany = tx((commits: readonly Commit[]): BatchCommitOutcome[] => {
    const out: BatchCommitOutcome[] = [];
    const refused = new Map<string, ConflictError>();
    for (const c of commits) {
      point('read version');
      const conflict = (bug('batch-refusal-not-sticky') ? undefined : refused.get(c.userId)) ?? conflictOf(c);
      if (conflict) refused.set(c.userId, conflict);
      out.push(conflict ?? apply(c));
    }
    return out;
  }, !bug('commit-not-atomic'));

  const erase = tx((e: Erasure): ErasureResult => {
    point('read version');
    const current = versionOf(e.userId);
    if (current !== e.expectedVersion) throw new ConflictError(`Version conflict for user ${JSON.stringify(e.userId)}: expected ${e.expectedVersion}, found ${current}.`);
    if (current === 0) return { erased: false, version: 0, indexes: [] };
    point('read indexes');
    const indexes = [...new Set(erasing.indexes.flatMap((s) => s.all(e.userId).map((r) => r.idx)))];
    indexes.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const steps: [string, TenantStatement<unknown>][] = [
      ['delete ledger', erasing.ledger],
      ['delete idempotency records', erasing.idempotency],
      ['delete entries', erasing.entries],
      ['delete removals', erasing.removals],
    ];
    if (bug('reset-keeps-ledger') && e.reset) steps.shift();
    if (!bug('erase-history-kept')) steps.push(['delete rank history', erasing.history]);
    if (!bug('erase-boosts-kept')) steps.push(['delete boosts', erasing.boosts]);
    for (const [label, s] of steps) {
      point(label);
      s.run(e.userId);
    }
    if (!bug('erase-counters-ignored')) addCounters(e.counters);
    if (!e.reset) {
      point('delete user');
      stmt.deleteUser.run(e.userId);
      return { erased: true, version: 0, indexes };
    }
    const version = e.expectedVersion + 1;
    storeState(e.userId, e.reset.state, version, true);
    addRows(e.reset.ledger);
    writeEntries(e.reset.leaderboard);
    // Remembered, so that a later erasure lists them (an external rank index keeps the reset's markers there).
    point('record removal');
    for (const idx of indexes) stmt.removal.run(e.userId, idx);
    return { erased: true, version, indexes };
  }, !bug('erase-not-atomic'));

  const loaded = (userId: string): VersionedState | null => {
    const r = stmt.user.get(userId);
    return r ? { state: JSON.parse(r.state) as VersionedState['state'], version: r.version } : null;
  };
  const recordOf = (userId: string, metricKey: string, key: string): IdempotencyRecord | null => {
    const r = stmt.record.get({ user: userId, metric: metricKey, key });
    return r ? { userId: bug('idempotency-not-per-user') ? r.user_id : userId, metricKey, key, eventId: r.event_id, at: r.at } : null;
  };
  const badCursor = (what: string, cursor: string) => new ValidationError(`Invalid ${what} cursor: ${JSON.stringify(cursor)}`, [{ path: [what === 'events' ? 'before' : 'after'], message: `must be a cursor returned by ${what === 'events' ? 'readEvents' : 'readUserLedger'}` }]);

  return {
    close: () => db.close(),
    tenant: (id) => tenant(bug('tenant-nests') && tenantId !== '' ? `${tenantId}/${id}` : id),
    async loadUser(userId) {
      return loaded(userId);
    },
    async loadUsers(userIds) {
      return userIds.map(loaded);
    },
    async loadForEvents(userIds, lookups) {
      return { users: userIds.map(loaded), records: lookups.map((l) => recordOf(l.userId, l.metricKey, l.key)) };
    },
    async getIdempotencyRecord(userId, metricKey, key) {
      return recordOf(userId, metricKey, key);
    },
    async commit(c) {
      return commitOne(c);
    },
    async commitBatch(commits) {
      return commitMany(commits);
    },
    async readLedger(q) {
      const where = ['tenant = @tenant', 'user_id = @user', 'kind = @kind', 'key = @key'];
      if (q.from !== undefined) where.push(bug('ledger-from-exclusive') ? 'at_ms > @from' : 'at_ms >= @from');
      if (q.to !== undefined) where.push(bug('ledger-to-inclusive') ? 'at_ms <= @to' : 'at_ms < @to');
      const desc = q.order === 'desc';
      const seqDesc = bug('ledger-ties-reversed') ? !desc : desc;
      const sql = `SELECT * FROM ledger WHERE ${where.join(' AND ')} ORDER BY at_ms ${desc ? 'DESC' : 'ASC'}, seq ${seqDesc ? 'DESC' : 'ASC'}${q.limit === undefined ? '' : ' LIMIT @limit'}`;
      const params: Record<string, unknown> = { user: q.userId, kind: q.kind, key: q.key };
      if (q.from !== undefined) params.from = msOf(q.from);
      if (q.to !== undefined) params.to = msOf(q.to);
      if (q.limit !== undefined) params.limit = Math.max(0, q.limit);
      return prep<LedgerRecord>(sql).all(params).map(rowOf);
    },
    async readUserLedger(userId, page) {
      let after = 0;
      if (page.after !== undefined) {
        if (!/^(?:0|[1-9][0-9]{0,15})$/.test(page.after)) throw badCursor('ledger', page.after);
        after = Number(page.after);
      }
      const limit = Math.max(0, page.limit);
      const found = prep<LedgerRecord>(`SELECT * FROM ledger WHERE ${bug('tenant-user-ledger-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant'} AND user_id = ? AND seq > ? ORDER BY seq LIMIT ?`).all(userId, after, limit + 1);
      const rows = found.slice(0, limit);
      const more = bug('ledger-next-on-full-page') ? rows.length === limit && rows.length > 0 : found.length > limit;
      const last = rows[rows.length - 1];
      return { rows: rows.map(rowOf), next: more && last ? String(last.seq) : null };
    },
    async listUsers(page) {
      const col = bug('list-users-bytes') ? 'user_bytes' : 'user_cu';
      const limit = Math.max(0, page.limit);
      const mine = bug('tenant-users-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant';
      if (page.after === undefined) return prep<{ user_id: string }>(`SELECT user_id FROM users WHERE ${mine} ORDER BY ${col} LIMIT ?`).all(limit).map((r) => r.user_id);
      const after = bug('list-users-bytes') ? utf8(page.after) : codeUnitKey(page.after);
      return prep<{ user_id: string }>(`SELECT user_id FROM users WHERE ${mine} AND ${col} > ? ORDER BY ${col} LIMIT ?`).all(after, limit).map((r) => r.user_id);
    },
    async getEntry(index, userId) {
      const e = stmt.entry.get(index, userId);
      return e ? { userId: e.user_id, value: e.value, reachedAt: e.reached_at, rank: rankOf(index, e) } : null;
    },
    async readRange(index, offset, limit) {
      const from = Math.max(0, offset);
      const n = Math.max(0, limit) + (bug('readrange-limit-off-by-one') ? 1 : 0);
      const rows = prep<{ user_id: string; value: number; reached_at: string }>(`SELECT user_id, value, reached_at FROM entries WHERE tenant = @tenant AND idx = ? ORDER BY value DESC, ${tieAt}, ${tieUser} LIMIT ? OFFSET ?`, entriesOf).all(index, n, from);
      return rows.map((r, i): RankedEntry => ({ userId: r.user_id, value: r.value, reachedAt: r.reached_at, rank: (bug('range-rank-offset') ? 0 : from) + i + 1 }));
    },
    async countEntries(index, range) {
      const where = ['tenant = @tenant', 'idx = @idx'];
      if (range?.min !== undefined) where.push(bug('count-min-exclusive') ? 'value > @min' : 'value >= @min');
      if (range?.max !== undefined) where.push(bug('count-max-inclusive') ? 'value <= @max' : 'value < @max');
      const params: Record<string, unknown> = { idx: index };
      if (range?.min !== undefined) params.min = range.min;
      if (range?.max !== undefined) params.max = range.max;
      return prep<{ n: number }>(`SELECT count(*) AS n FROM entries WHERE ${where.join(' AND ')}`, entriesOf).get(params)?.n ?? 0;
    },
    async readRankHistory(index, userId, limit) {
      const order = bug('rank-history-oldest') ? 'ASC' : 'DESC';
      const rows = prep<{ date: string; previous_rank: number | null; rank: number | null; previous_value: number | null; value: number | null }>(
        `SELECT date, previous_rank, rank, previous_value, value FROM history WHERE tenant = @tenant AND idx = ? AND user_id = ? ORDER BY date ${order} LIMIT ?`,
        historyOf,
      ).all(index, userId, Math.max(0, limit));
      if (bug('rank-history-oldest')) rows.reverse();
      return rows.map((r): RankHistoryRow => ({ date: r.date, previousRank: r.previous_rank, rank: r.rank, previousValue: r.previous_value, value: r.value }));
    },
    async getCounters(names) {
      return Object.fromEntries(names.map((n) => [n, stmt.counter.get(n)?.value ?? 0]));
    },
    async readEvents(userId, page) {
      // Order: at desc, metric key desc (code units), seq desc; the cursor is the last row's (at, key, seq).
      const keyDir = bug('events-key-ascending') ? 'ASC' : 'DESC';
      const where = ['tenant = @tenant', 'user_id = @user', "kind = 'metric'"];
      const params: Record<string, unknown> = { user: userId, limit: Math.max(0, page.limit) + 1 };
      if (page.metricKey !== undefined) {
        where.push('key = @metric');
        params.metric = page.metricKey;
      }
      if (page.before !== undefined) {
        const m = /^(-?(?:0|[1-9][0-9]{0,15}))\.((?:[0-9a-f]{4})*)\.([1-9][0-9]{0,15})$/.exec(page.before);
        if (!m) throw badCursor('events', page.before);
        params.ms = Number(m[1]);
        params.key = m[2];
        params.seq = Number(m[3]);
        const keyBefore = keyDir === 'DESC' ? 'key_cu < @key' : 'key_cu > @key';
        where.push(`(at_ms < @ms OR (at_ms = @ms AND (${keyBefore} OR (key_cu = @key AND seq < @seq))))`);
      }
      const found = prep<LedgerRecord>(`SELECT * FROM ledger WHERE ${where.join(' AND ')} ORDER BY at_ms DESC, key_cu ${keyDir}, seq DESC LIMIT @limit`).all(params);
      const limit = Math.max(0, page.limit);
      const rows = found.slice(0, limit);
      const last = bug('events-cursor-skips') && found.length > limit ? found[limit] : rows[rows.length - 1];
      return { rows: rows.map(rowOf), next: found.length > limit && last ? `${last.at_ms}.${last.key_cu}.${last.seq}` : null };
    },
    async eraseUser(erasure) {
      return erase(erasure);
    },
    async listBoosts(systemKey, page) {
      const limit = Math.max(0, page.limit);
      const rows =
        page.after === undefined
          ? prep<{ record: string }>('SELECT record FROM boosts WHERE tenant = @tenant AND system = ? ORDER BY id_cu LIMIT ?').all(systemKey, limit)
          : prep<{ record: string }>(`SELECT record FROM boosts WHERE tenant = @tenant AND system = ? AND id_cu ${bug('boosts-after-inclusive') ? '>=' : '>'} ? ORDER BY id_cu LIMIT ?`).all(systemKey, codeUnitKey(page.after), limit);
      return rows.map((r) => JSON.parse(r.record) as BoostRecord);
    },
    async getBoost(id) {
      const r = prep<{ record: string }>(`SELECT record FROM boosts WHERE ${bug('tenant-boost-get-unscoped') ? '@tenant IS NOT NULL' : 'tenant = @tenant'} AND id = ? LIMIT 1`).get(id);
      return r ? (JSON.parse(r.record) as BoostRecord) : null;
    },
  };
}
