/**
 * The in-memory store: single process, O(1) state access, O(log n) ranks, deep copies across the boundary.
 * Commits are atomic because every check runs before the first change and nothing awaits in between.
 */
import { ConflictError } from '../errors.js';
import type { IdempotencyRecord, LedgerRow } from '../core/types.js';
import { OrderedIndex, type IndexEntry } from './ordered-index.js';
import type { Commit, CommitResult, LedgerQuery, RankChange, RankedEntry, RankHistoryRow, Store } from './types.js';

// User states are kept serialised, as a database would keep them: every load parses a fresh copy and no
// caller object is ever retained.
interface StoredUser {
  json: string;
  version: number;
}

interface Board {
  tree: OrderedIndex;
  entries: Map<string, IndexEntry>;
}

// Ledger rows are append-only and never change once stored, so the store keeps one frozen copy and hands
// out that copy: callers cannot mutate it, and range reads cost no cloning.
const freeze = <T>(value: T): T => {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) freeze(v);
    Object.freeze(value);
  }
  return value;
};

/** Index of the first row with `at >= iso` (rows sorted by `at`). */
function lowerBound(rows: readonly LedgerRow[], iso: string): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((rows[mid] as LedgerRow).at < iso) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /** Called before each commit is applied (tests use it to inject faults). */
  beforeCommit?: (commit: Commit) => void | Promise<void>;
}

/** The in-memory store returned by {@link createMemoryStore}. */
export interface MemoryStore extends Store {
  /** Number of users stored. */
  readonly userCount: number;
}

/**
 * Creates an in-memory {@link Store}: for tests, demos and single-process apps. State lives in this process
 * and is lost when it exits.
 *
 * @example
 * ```ts
 * import { createMemoryStore } from 'laurel/memory';
 * const engine = createEngine({ config, store: createMemoryStore() });
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  options = options ?? {};
  const users = new Map<string, StoredUser>();
  const idempotency = new Map<string, IdempotencyRecord>();
  const ledgers = new Map<string, LedgerRow[]>();
  const boards = new Map<string, Board>();
  const history = new Map<string, RankHistoryRow[]>();
  const counters = new Map<string, number>();

  const idemKey = (userId: string, metricKey: string, key: string) => JSON.stringify([userId, metricKey, key]);
  const ledgerKey = (userId: string, kind: string, key: string) => JSON.stringify([userId, kind, key]);
  const board = (index: string): Board => {
    let b = boards.get(index);
    if (!b) boards.set(index, (b = { tree: new OrderedIndex(), entries: new Map() }));
    return b;
  };
  const ranked = (b: Board, e: IndexEntry): RankedEntry => ({ userId: e.userId, value: e.value, reachedAt: e.reachedAt, rank: b.tree.rank(e) });

  const apply = (c: Commit): CommitResult => {
    const version = c.expectedVersion + 1;
    users.set(c.userId, { json: JSON.stringify(c.state), version });
    if (c.idempotency) idempotency.set(idemKey(c.idempotency.userId, c.idempotency.metricKey, c.idempotency.key), { ...c.idempotency });
    for (const row of c.ledger) {
      const k = ledgerKey(row.userId, row.kind, row.key);
      let rows = ledgers.get(k);
      if (!rows) ledgers.set(k, (rows = []));
      const stored = freeze(JSON.parse(JSON.stringify(row)) as LedgerRow);
      // Rows mostly arrive in time order; insert after any row with the same or an earlier instant.
      if (rows.length === 0 || (rows[rows.length - 1] as LedgerRow).at <= row.at) rows.push(stored);
      else rows.splice(lowerBound(rows, row.at + '\uffff'), 0, stored);
    }
    for (const [name, delta] of Object.entries(c.counters)) counters.set(name, (counters.get(name) ?? 0) + delta);
    const ranks: RankChange[] = [];
    for (const w of c.leaderboard) {
      const b = board(w.index);
      const before = b.entries.get(w.userId);
      const previousRank = before ? b.tree.rank(before) : null;
      if (before) {
        b.tree.remove(before);
        b.entries.delete(w.userId);
      }
      let after: IndexEntry | undefined;
      if (!w.remove) {
        after = { userId: w.userId, value: w.value, reachedAt: w.reachedAt };
        b.tree.insert(after);
        b.entries.set(w.userId, after);
      }
      const change: RankChange = {
        index: w.index,
        userId: w.userId,
        previousRank,
        rank: after ? b.tree.rank(after) : null,
        previousValue: before ? before.value : null,
        value: after ? after.value : null,
      };
      ranks.push(change);
      if (w.unranked) continue;
      const hk = JSON.stringify([w.index, w.userId]);
      let rows = history.get(hk);
      if (!rows) history.set(hk, (rows = []));
      const last = rows[rows.length - 1];
      if (last && last.date === w.date) {
        last.rank = change.rank;
        last.value = change.value;
      } else {
        rows.push({ date: w.date, previousRank, rank: change.rank, previousValue: change.previousValue, value: change.value });
      }
    }
    return { version, ranks };
  };

  return {
    get userCount() {
      return users.size;
    },
    async loadUser(userId) {
      const found = users.get(userId);
      return found ? { state: JSON.parse(found.json), version: found.version } : null;
    },
    async loadUsers(userIds) {
      return userIds.map((id) => {
        const found = users.get(id);
        return found ? { state: JSON.parse(found.json), version: found.version } : null;
      });
    },
    async getIdempotencyRecord(userId, metricKey, key) {
      const found = idempotency.get(idemKey(userId, metricKey, key));
      return found ? { ...found } : null;
    },
    async commit(c) {
      if (options.beforeCommit) await options.beforeCommit(c);
      const current = users.get(c.userId);
      const currentVersion = current ? current.version : 0;
      if (currentVersion !== c.expectedVersion) {
        throw new ConflictError(`Version conflict for user ${JSON.stringify(c.userId)}: expected ${c.expectedVersion}, found ${currentVersion}.`);
      }
      if (c.idempotency && idempotency.has(idemKey(c.idempotency.userId, c.idempotency.metricKey, c.idempotency.key))) {
        throw new ConflictError(`Idempotency key ${JSON.stringify(c.idempotency.key)} was already used for this user and metric.`);
      }
      return apply(c);
    },
    async readLedger(q: LedgerQuery) {
      const rows = ledgers.get(ledgerKey(q.userId, q.kind, q.key));
      if (!rows) return [];
      const start = q.from === undefined ? 0 : lowerBound(rows, q.from);
      const end = q.to === undefined ? rows.length : lowerBound(rows, q.to);
      const limit = q.limit ?? Infinity;
      const out: LedgerRow[] = [];
      if (q.order === 'asc') for (let i = start; i < end && out.length < limit; i++) out.push(rows[i] as LedgerRow);
      else for (let i = end - 1; i >= start && out.length < limit; i--) out.push(rows[i] as LedgerRow);
      return out;
    },
    async getEntry(index, userId) {
      const b = boards.get(index);
      const e = b?.entries.get(userId);
      return b && e ? ranked(b, e) : null;
    },
    async readRange(index, offset, limit) {
      const b = boards.get(index);
      if (!b) return [];
      return b.tree.range(Math.max(0, offset), limit).map((e, i) => ({ userId: e.userId, value: e.value, reachedAt: e.reachedAt, rank: Math.max(0, offset) + i + 1 }));
    },
    async countEntries(index, range) {
      const b = boards.get(index);
      if (!b) return 0;
      if (!range) return b.tree.size;
      const atLeastMin = range.min === undefined ? b.tree.size : b.tree.countAtLeast(range.min);
      const atLeastMax = range.max === undefined ? 0 : b.tree.countAtLeast(range.max);
      return Math.max(0, atLeastMin - atLeastMax);
    },
    async readRankHistory(index, userId, limit) {
      const rows = history.get(JSON.stringify([index, userId])) ?? [];
      return rows.slice(Math.max(0, rows.length - limit)).reverse().map((r) => ({ ...r }));
    },
    async getCounters(names) {
      return Object.fromEntries(names.map((n) => [n, counters.get(n) ?? 0]));
    },
  };
}
