/**
 * The in-memory store: single process, O(1) state access, O(log n) ranks. User states are immutable values
 * (see `UserState`): the store keeps the state a commit hands it and hands that same value back, never a
 * copy. Ledger rows are kept in columns (numbers in one Float64Array, ids and data in one array), a few dozen
 * bytes per row, and rebuilt as objects only when read; each user's log of references to them in commit order
 * (for `readUserLedger`) adds 4 bytes per row. Commits are atomic because every check runs before the first
 * change and nothing awaits in between.
 */
import { DIRECT, type DirectStore } from './direct.js';
import { ConflictError, ValidationError } from '../errors.js';
import type { AwardRow, IdempotencyRecord, LeaderboardWrite, LedgerKind, LedgerRow } from '../core/types.js';
import type { BoostRecord } from '../core/boosts.js';
import { instantMs, instantParam, isoOf } from '../core/instants.js';
import { validateText } from '../core/users.js';
import { instantOf, OrderedIndex, type IndexEntry } from './ordered-index.js';
import type { BatchCommitOutcome, Commit, CommitResult, Erasure, ErasureResult, EventsPage, LedgerPage, LedgerQuery, RankChange, RankedEntry, RankHistoryRow, Store, VersionedState, OutboxStore } from './types.js';
import { MemoryOutbox } from './outbox.js';
import { frozenJsonCopy } from './json-copy.js';
import { checkCounters } from './counters.js';

interface StoredUser {
  state: VersionedState['state'];
  version: number;
  /** The user's entry of the store's idempotency records (the same map), kept here to save a look-up per call. */
  idem: Map<string, Map<string, IdemValue>> | undefined;
}

/**
 * An idempotency record as kept: the position in the user's log (see {@link UserLedgers}) of the ledger row
 * the commit wrote for the event, whose id and instant are the record's (what the core commits: the
 * metric row of the event); else, for a record that names no row of its commit, `eventId NUL at`. A
 * position is a small integer: no string is built and kept per record.
 */
type IdemValue = number | string;

/**
 * One index: its entries in rank order, and per user the entry and the rank history, together, so that a
 * write finds both with one look-up.
 */
interface Board {
  tree: OrderedIndex;
  users: Map<string, BoardUser>;
}

/** A user's place in one index: the current entry (none once removed) and the rank history rows (ranked indexes). */
interface BoardUser {
  entry: IndexEntry | undefined;
  /** The entry's `reachedAt` in epoch ms (read once, when written), for the index's removal of it. */
  ms: number;
  /** One row per date, in date order. */
  rows: RankHistoryRow[] | undefined;
  /** The last of `rows`, kept here so that the common write (same or later date) reads no array. */
  last: RankHistoryRow | undefined;
}

/** What a commit's writes need that can fail, done before its first change (see `prepare`). */
interface Prepared {
  /** The ledger rows' data as kept, in row order. */
  data: unknown[];
  /** The leaderboard writes' `reachedAt` in epoch ms, in write order (NaN for a removal). */
  ms: number[];
}

/**
 * One user's rows of one kind and key, in `at` order: `nums` holds (at ms, delta, total) per row and `refs`
 * (id, data) per row. Rows never change once stored; `data` objects are frozen when stored.
 */
class Ledger {
  nums = new Float64Array(12);
  refs: unknown[] = [];
  length = 0;
  /**
   * Rows already read, as frozen objects handed out again on later reads (a chart re-reads its range), made
   * on first read only: a ledger nobody reads stays in its compact columns.
   */
  read: (LedgerRow | undefined)[] | null = null;
  constructor(
    readonly userId: string,
    readonly kind: LedgerKind,
    readonly key: string,
  ) {}

  /** Index of the first row with `at >= ms`. */
  lowerBound(ms: number): number {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.nums[mid * 3] as number) < ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Stores a row, with its data as kept (see `packData`), after any row with the same or an earlier instant
   * (rows mostly arrive in time order); returns its position (the length before the call unless it was
   * slotted in before later rows).
   */
  add(row: LedgerRow, data: unknown): number {
    const ms = instantMs(row.at);
    if (this.nums.length < (this.length + 1) * 3) {
      const grown = new Float64Array(this.nums.length * 2);
      grown.set(this.nums);
      this.nums = grown;
    }
    let at = this.length;
    if (at > 0 && (this.nums[(at - 1) * 3] as number) > ms) {
      at = this.lowerBound(ms);
      while (at < this.length && (this.nums[at * 3] as number) <= ms) at++;
      this.nums.copyWithin((at + 1) * 3, at * 3, this.length * 3);
      this.refs.splice(at * 2, 0, undefined, undefined);
      if (this.read !== null && at < this.read.length) this.read.splice(at, 0, undefined);
    }
    this.nums[at * 3] = ms;
    this.nums[at * 3 + 1] = row.delta;
    this.nums[at * 3 + 2] = row.total;
    this.refs[at * 2] = row.id;
    this.refs[at * 2 + 1] = data;
    this.length++;
    return at;
  }

  row(i: number): LedgerRow {
    const done = this.read?.[i];
    if (done !== undefined) return done;
    const row = this.frozen(i);
    (this.read ??= [])[i] = row;
    return row;
  }

  /** The row at position `i`, not kept: a replay reads every row once, which should not leave objects behind. */
  peek(i: number): LedgerRow {
    return this.read?.[i] ?? this.frozen(i);
  }

  private frozen(i: number): LedgerRow {
    const row = this.build(i);
    if (row.data !== null && typeof row.data === 'object') Object.freeze(row.data);
    return Object.freeze(row);
  }

  private build(i: number): LedgerRow {
    return {
      id: this.refs[i * 2] as string,
      userId: this.userId,
      kind: this.kind,
      key: this.key,
      at: isoOf(this.nums[i * 3] as number),
      delta: this.nums[i * 3 + 1] as number,
      total: this.nums[i * 3 + 2] as number,
      data: unpackData(this.refs[i * 2 + 1]),
    };
  }
}

// A row of a user's log: (ledger no, ordinal) packed as no * 2^22 + ordinal into a Uint32Array while every
// no < 1024 and ordinal < 2^22; else as no * 2^32 + ordinal into a Float64Array (exact below 2^53).
const NARROW_NOS = 1024;
const NARROW_ORDINALS = 2 ** 22;
const WIDE = 2 ** 32;

/**
 * One user's ledgers: the map `kind NUL key` (a metric's key alone) -> ledger number, the ledgers by number
 * (`list`, in creation order), and the user's log: one packed (ledger number, ordinal) per row in commit
 * order, the rows of one commit in the order it listed them, where a row's ordinal is its place in its
 * ledger's arrival order. 4 bytes per row (8 past 1,024 ledgers or 2^22 rows in one ledger). A ledger keeps
 * rows by instant, so a row that arrives before a stored instant moves the rows after it: from then on,
 * `orders` maps that ledger's ordinals to positions (kept up to date at the cost of the move itself).
 * (The map is the user's object itself: the store keeps one per user.)
 */
class UserLedgers extends Map<string, number> {
  list: Ledger[] = [];
  /** A plain array of small integers for the first 16 rows (a typed array costs some 200 bytes more). */
  log: number[] | Uint32Array | Float64Array = [];
  wide = false;
  length = 0;
  orders: Map<number, Uint32Array> | null = null;

  ledger(k: string): Ledger | undefined {
    const no = this.get(k);
    return no === undefined ? undefined : this.list[no];
  }

  /** Stores `row` (`data` as kept) in the ledger of `k` (its kind and key), created when missing, and appends it to the log. */
  add(k: string, row: LedgerRow, data: unknown): void {
    let no = this.get(k);
    let ledger: Ledger;
    if (no === undefined) {
      no = this.list.length;
      ledger = new Ledger(row.userId, row.kind, row.key);
      this.set(k, no);
      // Grown one by one while short (a push would reserve 16 more places), by push after that.
      if (no < 16) this.list = this.list.concat(ledger);
      else this.list.push(ledger);
    } else ledger = this.list[no] as Ledger;
    const ordinal = ledger.length;
    const at = ledger.add(row, data);
    if (at !== ordinal || this.orders?.has(no)) this.reorder(no, ordinal, at);
    if (!this.wide && (no >= NARROW_NOS || ordinal >= NARROW_ORDINALS)) {
      const wide = new Float64Array(this.log.length);
      for (let i = 0; i < this.length; i++) {
        const packed = this.log[i] as number;
        wide[i] = Math.floor(packed / NARROW_ORDINALS) * WIDE + (packed % NARROW_ORDINALS);
      }
      this.log = wide;
      this.wide = true;
    }
    if (this.length === this.log.length) {
      const log = this.log;
      if (Array.isArray(log) && this.length < 16) {
        const grown: number[] = new Array(Math.max(2, this.length * 2));
        for (let i = 0; i < this.length; i++) grown[i] = log[i] as number;
        this.log = grown;
      } else {
        const grown = this.wide ? new Float64Array(Math.max(4, this.length * 2)) : new Uint32Array(Math.max(4, this.length * 2));
        grown.set(log);
        this.log = grown;
      }
    }
    this.log[this.length++] = this.wide ? no * WIDE + ordinal : no * NARROW_ORDINALS + ordinal;
  }

  /** Ledger `no` stored its row of ordinal `ordinal` at position `at`: the rows from `at` on moved up one place. */
  private reorder(no: number, ordinal: number, at: number): void {
    const orders = (this.orders ??= new Map());
    let order = orders.get(no);
    if (order === undefined) {
      order = new Uint32Array(Math.max(8, ordinal * 2));
      for (let o = 0; o < ordinal; o++) order[o] = o;
      orders.set(no, order);
    } else if (order.length <= ordinal) {
      const grown = new Uint32Array(ordinal * 2);
      grown.set(order);
      orders.set(no, (order = grown));
    }
    if (at < ordinal) for (let o = 0; o < ordinal; o++) if ((order[o] as number) >= at) order[o] = (order[o] as number) + 1;
    order[ordinal] = at;
  }

  /** The `i`-th row in commit order. */
  row(i: number): LedgerRow {
    const packed = this.log[i] as number;
    const unit = this.wide ? WIDE : NARROW_ORDINALS;
    const no = Math.floor(packed / unit);
    const ordinal = packed - no * unit;
    const order = this.orders?.get(no);
    return (this.list[no] as Ledger).peek(order === undefined ? ordinal : (order[ordinal] as number));
  }
}

/** A {@link Store.readUserLedger} cursor of the memory store: the number of the user's rows before the page. */
function cursorOf(after: string | undefined): number {
  if (after === undefined) return 0;
  const n = typeof after === 'string' && /^(?:0|[1-9][0-9]{0,15})$/.test(after) ? Number(after) : NaN;
  if (!Number.isSafeInteger(n)) throw new ValidationError(`Invalid ledger cursor: ${JSON.stringify(after)}`, [{ path: ['after'], message: 'must be a cursor returned by readUserLedger' }]);
  return n;
}

/**
 * A {@link Store.readEvents} cursor of the memory store: the last row read, as its instant (ms), its place
 * among the rows of that instant in its metric's ledger (stable: rows of one instant keep their arrival
 * order, and a later row of the same instant goes after them) and its metric key: `ms.ordinal.key`.
 */
function eventCursorOf(before: string | undefined): { ms: number; ord: number; key: string } | null {
  if (before === undefined) return null;
  const m = typeof before === 'string' ? /^(-?(?:0|[1-9][0-9]{0,15}))\.(0|[1-9][0-9]{0,9})\.([^]*)$/.exec(before) : null;
  const ms = m ? Number(m[1]) : NaN;
  if (!m || !Number.isSafeInteger(ms)) throw new ValidationError(`Invalid events cursor: ${JSON.stringify(before)}`, [{ path: ['before'], message: 'must be a cursor returned by readEvents' }]);
  return { ms, ord: Number(m[2]), key: m[3] as string };
}

/** Row data as kept: an award without boosts as one short string (`type|trigger id`), anything else as a frozen copy. */
function packData(data: LedgerRow['data']): unknown {
  if (data === null || data === undefined) return null;
  const award = data as { trigger?: unknown; type?: unknown; boosts?: unknown };
  if (typeof award.trigger === 'string' && typeof award.type === 'string' && award.boosts === undefined && Object.keys(data).length === 2) return packedAward(award.type, award.trigger);
  return frozenJsonCopy(data);
}

/**
 * Whether `at` is an instant in the form a ledger row gives it back (`toISOString`'s; a row keeps its instant
 * as a number): only then can a row's position stand for an idempotency record. Anything else, an instant in
 * another form or no instant at all, is false.
 */
function asRowGivesBack(at: unknown): boolean {
  if (typeof at !== 'string') return false;
  const ms = instantMs(at);
  return Number.isFinite(ms) && isoOf(ms) === at;
}

/**
 * Strings `a SEP b` made once per (a, b) and shared: for pairs that come from configurations (ledger kinds and
 * keys, award types and trigger ids), so a row refers to one string instead of building its own. A string
 * joined per use would be hashed anew each time, and a concatenation of more than a dozen characters is a
 * tree of strings in V8 (a trigger id that is a UUID makes one) that whatever keeps it keeps whole. Bounded:
 * past 10 000 pairs (only a caller inventing keys without end gets there), joined per use.
 */
class JoinedNames {
  private readonly byFirst = new Map<string, Map<string, string>>();
  private count = 0;
  constructor(private readonly sep: string) {}

  of(a: string, b: string): string {
    let byB = this.byFirst.get(a);
    const hit = byB?.get(b);
    if (hit !== undefined) return hit;
    const made = `${a}${this.sep}${b}`;
    if (this.count < 10_000) {
      if (byB === undefined) this.byFirst.set(a, (byB = new Map()));
      byB.set(b, made);
      this.count++;
    }
    return made;
  }
}

// Packed awards (`type|trigger id`, see packData): every row of a trigger keeps the same string.
const packedAwards = new JoinedNames('|');
const packedAward = (type: string, trigger: string): string => packedAwards.of(type, trigger);

function unpackData(packed: unknown): LedgerRow['data'] {
  if (typeof packed !== 'string') return packed as LedgerRow['data'];
  const bar = packed.indexOf('|');
  return { trigger: packed.slice(bar + 1), type: packed.slice(0, bar) as AwardRow['type'] };
}

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /** Called before each commit is applied (tests use it to inject faults). */
  beforeCommit?: (commit: Commit) => void | Promise<void>;
}

/** The in-memory store returned by {@link createMemoryStore}. */
export interface MemoryStore extends Omit<Store, keyof OutboxStore | 'tenant'>, OutboxStore {
  /** Number of users stored (of this tenant). */
  readonly userCount: number;
  /**
   * The store of tenant `id` (see `Store.tenant`): a partition of its own in this process, made on first
   * use, with every structure (users, ledgers, indexes, counters, boosts, outbox) separate from the other
   * tenants'. Tenants do not nest: `tenant` on a tenant's store returns the sibling tenant.
   */
  tenant(id: string): MemoryStore;
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
  const tenants = new Map<string, MemoryStore>();
  const tenant = (id: string): MemoryStore => {
    let store = tenants.get(id);
    if (!store) {
      // As the engine and the PostgreSQL store check it.
      validateText(id, ['tenant'], 255, { nonEmpty: true });
      tenants.set(id, (store = partition(options, tenant)));
    }
    return store;
  };
  return partition(options, tenant);
}

// `kind NUL key` per (kind, key), made once: the keys are the configuration's (points systems, streak, ...),
// and a string joined on every row would be hashed anew each time.
const joinedKeys = new JoinedNames('\u0000');
const joinedKey = (kind: string, key: string): string => joinedKeys.of(kind, key);

/** One tenant's store (the default tenant's too); `tenant` finds or makes the sibling partitions. */
function partition(options: MemoryStoreOptions, tenant: (id: string) => MemoryStore): MemoryStore {
  const users = new Map<string, StoredUser>();
  // user -> metric -> key -> the record (see IdemValue), grouped by user so that an erasure finds the user's
  // records without scanning everyone's, and by metric so that a look-up builds no joined key string.
  const idempotency = new Map<string, Map<string, Map<string, IdemValue>>>();
  // Change events, consumer cursors, marks and the due index (issue 15).
  const outbox = new MemoryOutbox();
  // user -> `kind NUL key` -> rows, and the user's log (see UserLedgers). Kinds and keys are the
  // configuration's own strings, so their hashes are cached.
  const ledgers = new Map<string, UserLedgers>();
  const ledgerKey = (kind: LedgerKind, key: string) => (kind === 'metric' ? key : joinedKey(kind, key));
  /** Stores a ledger row (`data` as kept); returns its position in the user's log. */
  const addRow = (row: LedgerRow, data: unknown): number => {
    let mine = ledgers.get(row.userId);
    if (!mine) ledgers.set(row.userId, (mine = new UserLedgers()));
    mine.add(ledgerKey(row.kind, row.key), row, data);
    if (row.kind === 'operation' && (row.key === 'createBoost' || row.key === 'deleteBoost')) boostRow(row);
    return mine.length - 1;
  };
  // Runtime boosts (Store.listBoosts): by id, each system's ids in code-unit order, each user's ids.
  const boostsById = new Map<string, BoostRecord>();
  const boostIds = new Map<string, string[]>();
  const boostsOfUser = new Map<string, Set<string>>();
  const seek = (ids: readonly string[], id: string, after: boolean): number => {
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const at = ids[mid] as string;
      if (at < id || (after && at === id)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const removeBoost = (id: string): void => {
    const b = boostsById.get(id);
    if (!b) return;
    boostsById.delete(id);
    const ids = boostIds.get(b.pointsSystemKey);
    if (ids) {
      const i = seek(ids, id, false);
      if (ids[i] === id) ids.splice(i, 1);
      if (ids.length === 0) boostIds.delete(b.pointsSystemKey);
    }
    const mine = boostsOfUser.get(b.userId);
    mine?.delete(id);
    if (mine?.size === 0) boostsOfUser.delete(b.userId);
  };
  const boostRow = (row: LedgerRow): void => {
    const data = row.data as { id?: string; result?: { boost?: BoostRecord } } | null;
    if (row.key === 'deleteBoost') {
      const id = data?.id;
      if (typeof id === 'string' && boostsById.get(id)?.userId === row.userId) removeBoost(id);
      return;
    }
    const b = data?.result?.boost;
    if (!b) return;
    removeBoost(b.id);
    const copy: BoostRecord = Object.freeze({ id: b.id, userId: row.userId, pointsSystemKey: b.pointsSystemKey, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding });
    boostsById.set(b.id, copy);
    let ids = boostIds.get(b.pointsSystemKey);
    if (!ids) boostIds.set(b.pointsSystemKey, (ids = []));
    ids.splice(seek(ids, b.id, false), 0, b.id);
    let mine = boostsOfUser.get(row.userId);
    if (!mine) boostsOfUser.set(row.userId, (mine = new Set()));
    mine.add(b.id);
  };
  // listUsers: the user ids in code-unit order, brought up to date by the first listUsers call after users
  // were created (a Map keeps insertion order, and an erasure takes its id out of both, so the new ids are
  // the last `users.size - sortedIds.length` keys): nothing on the commit path, one id reference per user.
  let sortedIds: string[] = [];
  const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const sortUsers = (): string[] => {
    const known = sortedIds.length;
    if (users.size === known) return sortedIds;
    const added: string[] = [];
    let i = 0;
    for (const id of users.keys()) if (i++ >= known) added.push(id);
    added.sort(byCodeUnits);
    if (known === 0) return (sortedIds = added);
    const merged: string[] = new Array(known + added.length);
    let a = 0;
    let b = 0;
    let m = 0;
    while (a < known && b < added.length) merged[m++] = (sortedIds[a] as string) < (added[b] as string) ? (sortedIds[a++] as string) : (added[b++] as string);
    while (a < known) merged[m++] = sortedIds[a++] as string;
    while (b < added.length) merged[m++] = added[b++] as string;
    return (sortedIds = merged);
  };
  const boards = new Map<string, Board>();
  const counters = new Map<string, number>();
  // user -> the indexes a write removed the user's entry from (rare: a board group or attribute changed, a
  // value fell to 0), so that an erasure lists them for an external rank index that remembers removals.
  const removedFrom = new Map<string, Set<string>>();
  const removalsOf = (userId: string): Set<string> => {
    let mine = removedFrom.get(userId);
    if (!mine) removedFrom.set(userId, (mine = new Set()));
    return mine;
  };

  const board = (index: string): Board => {
    let b = boards.get(index);
    if (!b) boards.set(index, (b = { tree: new OrderedIndex(), users: new Map() }));
    return b;
  };
  const ranked = (b: Board, e: IndexEntry): RankedEntry => ({ userId: e.userId, value: e.value, reachedAt: e.reachedAt, rank: b.tree.rank(e) });
  const loaded = (userId: string): VersionedState | null => {
    const found = users.get(userId);
    return found ? { state: found.state, version: found.version } : null;
  };
  // A user's idempotency records: the stored user's `idem` (always idempotency.get(userId) for a stored user).
  const idemOf = (userId: string, stored: StoredUser | undefined): Map<string, Map<string, IdemValue>> | undefined => (stored !== undefined ? stored.idem : idempotency.get(userId));
  const recordOf = (userId: string, metricKey: string, key: string): IdempotencyRecord | null => {
    const found = idemOf(userId, users.get(userId))?.get(metricKey)?.get(key);
    if (found === undefined) return null;
    if (typeof found === 'number') {
      const row = (ledgers.get(userId) as UserLedgers).row(found);
      return { userId, metricKey, key, eventId: row.id, at: row.at };
    }
    const nul = found.indexOf('\u0000');
    return { userId, metricKey, key, eventId: found.slice(0, nul), at: found.slice(nul + 1) };
  };
  const conflictOf = (c: Commit): ConflictError | null => {
    const current = users.get(c.userId);
    const currentVersion = current ? current.version : 0;
    if (currentVersion !== c.expectedVersion) {
      return new ConflictError(`Version conflict for user ${JSON.stringify(c.userId)}: expected ${c.expectedVersion}, found ${currentVersion}.`);
    }
    const idem = c.idempotency;
    if (idem && idemOf(idem.userId, idem.userId === c.userId ? current : users.get(idem.userId))?.get(idem.metricKey)?.has(idem.key)) {
      return new ConflictError(`Idempotency key ${JSON.stringify(idem.key)} was already used for this user and metric.`);
    }
    return null;
  };

  /**
   * A commit's parts that can throw when malformed, done before its first change: the ledger rows' data as
   * kept (a copy JSON cannot write throws) and the instants of its entries (an index refuses one that is
   * not an instant). So a commit, a batch or an erasure applies whole or changes nothing.
   */
  const prepare = (ledger: readonly LedgerRow[], writes: readonly LeaderboardWrite[]): Prepared => {
    const data: unknown[] = new Array(ledger.length);
    for (let i = 0; i < ledger.length; i++) data[i] = packData((ledger[i] as LedgerRow).data);
    const ms: number[] = new Array(writes.length);
    for (let i = 0; i < writes.length; i++) {
      const w = writes[i] as LeaderboardWrite;
      ms[i] = w.remove ? Number.NaN : instantOf(w.reachedAt);
    }
    return { data, ms };
  };

  const apply = (c: Commit, prepared: Prepared): CommitResult => {
    const version = c.expectedVersion + 1;
    const idem = c.idempotency;
    // The record kept as the position of the commit's row for the event when there is one (see IdemValue):
    // the user's own row with the record's id and instant, that instant in the form the ledger gives back.
    // Decided before the first change (it throws nothing, whatever the record holds).
    const own = idem !== null && idem.userId === c.userId && asRowGivesBack(idem.at);
    // A stored user's record is never handed out (a read builds its own VersionedState): updated in place.
    let stored = users.get(c.userId);
    if (stored) {
      stored.state = c.state;
      stored.version = version;
    } else users.set(c.userId, (stored = { state: c.state, version, idem: idempotency.get(c.userId) }));
    let value: IdemValue | undefined;
    for (let i = 0; i < c.ledger.length; i++) {
      const row = c.ledger[i] as LedgerRow;
      const at = addRow(row, prepared.data[i]);
      if (own && value === undefined && row.id === idem.eventId && row.at === idem.at && row.userId === c.userId) value = at;
    }
    if (idem) {
      const owner = idem.userId === c.userId ? stored : users.get(idem.userId);
      let mine = idemOf(idem.userId, owner);
      if (!mine) {
        idempotency.set(idem.userId, (mine = new Map()));
        if (owner) owner.idem = mine;
      }
      let keys = mine.get(idem.metricKey);
      if (!keys) mine.set(idem.metricKey, (keys = new Map()));
      keys.set(idem.key, value ?? `${idem.eventId}\u0000${idem.at}`);
    }
    for (const name of Object.keys(c.counters)) counters.set(name, (counters.get(name) ?? 0) + (c.counters[name] as number));
    const ranks = writeEntries(c.leaderboard, prepared.ms);
    if (c.changes && c.changes.length > 0) outbox.appendCommit(c.changes, ranks, c.userId);
    outbox.setDue(c.userId, c.due);
    return { version, ranks };
  };

  /** A commit, checked and applied with nothing awaited: a conflict throws with nothing changed. */
  const commitNow = (c: Commit): CommitResult => {
    checkCounters(c.counters);
    const conflict = conflictOf(c);
    if (conflict) throw conflict;
    return apply(c, prepare(c.ledger, c.leaderboard));
  };

  /** Applies leaderboard writes in order (entries and rank history), `ms` their instants; their rank changes. */
  const writeEntries = (writes: readonly LeaderboardWrite[], ms: readonly number[]): RankChange[] => {
    const ranks: RankChange[] = [];
    for (let i = 0; i < writes.length; i++) {
      const w = writes[i] as LeaderboardWrite;
      if (w.remove) {
        // Where the user's entry was taken out, for an erasure's list of indexes (see `eraseUser`).
        removalsOf(w.userId).add(w.index);
      }
      const b = board(w.index);
      let slot = b.users.get(w.userId);
      const before = slot?.entry;
      // Indexes written `unranked` (every user's points total) are read by value ranges only: no ranks.
      const isRanked = w.unranked !== true;
      // The tree's remove and insert report the ranks they find (one search each, not two).
      let previousRank: number | null = null;
      if (before) {
        const had = b.tree.remove(before, (slot as BoardUser).ms);
        if (isRanked) previousRank = had;
      }
      const previousValue = before ? before.value : null;
      let after: IndexEntry | undefined;
      let rank: number | null = null;
      if (!w.remove) {
        // The entry taken out is the user's alone (readers get copies): written again and put back, no new
        // object per write (one that would live as long as the user's next write to this index).
        if (before) {
          after = before;
          after.value = w.value;
          after.reachedAt = w.reachedAt;
        } else {
          after = { userId: w.userId, value: w.value, reachedAt: w.reachedAt };
        }
        const now = b.tree.insert(after, ms[i] as number);
        if (isRanked) rank = now;
      }
      // A ranked index keeps the user's history even without an entry; an unranked one forgets a removed user.
      const afterMs = after ? (ms[i] as number) : Number.NaN;
      if (!slot) {
        if (after || isRanked) b.users.set(w.userId, (slot = { entry: after, ms: afterMs, rows: undefined, last: undefined }));
      } else {
        slot.entry = after;
        slot.ms = afterMs;
        if (!after && !isRanked && !slot.rows) b.users.delete(w.userId);
      }
      const change: RankChange = {
        index: w.index,
        userId: w.userId,
        previousRank,
        rank,
        previousValue,
        value: after ? after.value : null,
      };
      if (w.thresholdRank !== undefined) change.threshold = b.tree.at(w.thresholdRank - 1)?.value ?? 0;
      ranks.push(change);
      if (!isRanked) continue;
      const mine = slot as BoardUser;
      // Rows stay in date order, one per date: a write dated before the last row (a clock that went back)
      // updates or slots in at its own date, as the PostgreSQL store's upsert does. The common cases first,
      // without reading the rows: another write on the last row's date, or a later date.
      const last = mine.last;
      if (last !== undefined && last.date === w.date) {
        last.rank = change.rank;
        last.value = change.value;
        continue;
      }
      const rows = (mine.rows ??= []);
      if (last === undefined || last.date < w.date) {
        rows.push((mine.last = { date: w.date, previousRank, rank: change.rank, previousValue: change.previousValue, value: change.value }));
        continue;
      }
      let at = rows.length;
      while (at > 0 && (rows[at - 1] as RankHistoryRow).date > w.date) at--;
      const same = rows[at - 1];
      if (same && same.date === w.date) {
        same.rank = change.rank;
        same.value = change.value;
      } else {
        rows.splice(at, 0, { date: w.date, previousRank, rank: change.rank, previousValue: change.previousValue, value: change.value });
      }
    }
    return ranks;
  };

  /**
   * `eraseUser`: every check before the first change, nothing awaited. Cost: one look-up per index the store
   * holds (boards and rank histories are kept per index) plus the user's own entries and ledgers.
   */
  const erase = (e: Erasure): ErasureResult => {
    checkCounters(e.counters);
    const current = users.get(e.userId);
    const currentVersion = current ? current.version : 0;
    if (currentVersion !== e.expectedVersion) {
      throw new ConflictError(`Version conflict for user ${JSON.stringify(e.userId)}: expected ${e.expectedVersion}, found ${currentVersion}.`);
    }
    if (!current) return { erased: false, version: 0, indexes: [] };
    const prepared = e.reset ? prepare(e.reset.ledger, e.reset.leaderboard) : null;
    const indexes = new Set<string>(removedFrom.get(e.userId));
    removedFrom.delete(e.userId);
    for (const [name, b] of boards) {
      const slot = b.users.get(e.userId);
      if (!slot) continue;
      if (slot.entry) b.tree.remove(slot.entry, slot.ms);
      b.users.delete(e.userId);
      indexes.add(name);
      if (b.users.size === 0) boards.delete(name);
    }
    ledgers.delete(e.userId);
    idempotency.delete(e.userId);
    for (const id of [...(boostsOfUser.get(e.userId) ?? [])]) removeBoost(id);
    outbox.eraseUser(e.userId, !e.reset);
    for (const name of Object.keys(e.counters)) counters.set(name, (counters.get(name) ?? 0) + (e.counters[name] as number));
    let version = 0;
    if (e.reset) {
      version = e.expectedVersion + 1;
      users.set(e.userId, { state: e.reset.state, version, idem: undefined });
      for (let i = 0; i < e.reset.ledger.length; i++) addRow(e.reset.ledger[i] as LedgerRow, (prepared as Prepared).data[i]);
      const ranks = writeEntries(e.reset.leaderboard, (prepared as Prepared).ms);
      if (e.reset.changes && e.reset.changes.length > 0) outbox.appendCommit(e.reset.changes, ranks, e.userId);
      outbox.setDue(e.userId, e.reset.due);
      // An external rank index keeps a marker of the reset in each of these indexes (withRankIndex): listed
      // again by a later erasure, which then forgets the user there too (as the PostgreSQL store does).
      if (indexes.size > 0) {
        const mine = removalsOf(e.userId);
        for (const name of indexes) mine.add(name);
      }
    } else {
      users.delete(e.userId);
      // Out of the sorted ids too when it was merged in already (else it was among the new ids, now gone).
      const ids = sortedIds;
      let lo = 0;
      let hi = ids.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((ids[mid] as string) < e.userId) lo = mid + 1;
        else hi = mid;
      }
      if (ids[lo] === e.userId) ids.splice(lo, 1);
    }
    return { erased: true, version, indexes: [...indexes].sort(byCodeUnits) };
  };

  // The engine's direct path (src/store/direct.ts): usable while the store's methods are its own (see below)
  // and it has no beforeCommit hook, which may wait.
  const direct: DirectStore = {
    usable: (via) => options.beforeCommit === undefined && (via as Store).commit === ownCommit && (via as Store).loadForEvents === ownLoad,
    load: loaded,
    record: recordOf,
    commit: commitNow,
  };

  const store: MemoryStore = {
    get userCount() {
      return users.size;
    },
    tenant,
    readChanges: (page) => outbox.readChanges(page),
    claimConsumer: (lease) => outbox.claimConsumer(lease),
    advanceConsumer: (update) => outbox.advanceConsumer(update),
    releaseConsumer: (lease) => outbox.releaseConsumer(lease),
    getMarks: (marks) => outbox.getMarks(marks),
    appendChanges: (entry) => outbox.appendChanges(entry),
    claimDue: (claim) => outbox.claimDue(claim),
    pruneChanges: (prune) => outbox.pruneChanges(prune),
    recordDeliveries: (records) => outbox.recordDeliveries(records),
    readDeliveries: (query) => outbox.readDeliveries(query),
    async loadUser(userId) {
      return loaded(userId);
    },
    async loadUsers(userIds) {
      return userIds.map(loaded);
    },
    async loadForEvents(userIds, lookups) {
      return {
        users: userIds.map(loaded),
        records: lookups.map((l) => recordOf(l.userId, l.metricKey, l.key)),
      };
    },
    async getIdempotencyRecord(userId, metricKey, key) {
      return recordOf(userId, metricKey, key);
    },
    async commit(c) {
      if (options.beforeCommit) await options.beforeCommit(c);
      return commitNow(c);
    },
    async commitBatch(commits) {
      if (options.beforeCommit) for (const c of commits) await options.beforeCommit(c);
      commits.forEach((c, i) => checkCounters(c.counters, ['commits', i, 'counters']));
      const prepared = commits.map((c) => prepare(c.ledger, c.leaderboard));
      const out: BatchCommitOutcome[] = [];
      const refused = new Map<string, ConflictError>();
      commits.forEach((c, i) => {
        const conflict = refused.get(c.userId) ?? conflictOf(c);
        if (conflict) refused.set(c.userId, conflict);
        out.push(conflict ?? apply(c, prepared[i] as Prepared));
      });
      return out;
    },
    async readLedger(q: LedgerQuery) {
      // Compared as instants (as on PostgreSQL), and checked whether or not the user has rows.
      const from = q.from === undefined ? undefined : instantParam('from', q.from);
      const to = q.to === undefined ? undefined : instantParam('to', q.to);
      const rows = ledgers.get(q.userId)?.ledger(ledgerKey(q.kind, q.key));
      if (!rows) return [];
      const start = from === undefined ? 0 : rows.lowerBound(from);
      const end = to === undefined ? rows.length : rows.lowerBound(to);
      const limit = q.limit ?? Infinity;
      const out: LedgerRow[] = [];
      if (q.order === 'asc') for (let i = start; i < end && out.length < limit; i++) out.push(rows.row(i));
      else for (let i = end - 1; i >= start && out.length < limit; i--) out.push(rows.row(i));
      return out;
    },
    // O(limit): the cursor is the number of the user's rows already read, a place in the user's log.
    async readUserLedger(userId, page): Promise<LedgerPage> {
      let i = cursorOf(page.after);
      const mine = ledgers.get(userId);
      if (!mine) return { rows: [], next: null };
      const rows: LedgerRow[] = [];
      for (; i < mine.length && rows.length < page.limit; i++) rows.push(mine.row(i));
      return { rows, next: i < mine.length ? String(i) : null };
    },
    // O(log n + limit) when no user was created since the previous call; after n users of which p are new,
    // that call first merges the new ids in: O(n + p log p), paid once for all the calls after it.
    async listUsers(page) {
      const ids = sortUsers();
      let lo = 0;
      if (page.after !== undefined) {
        const after = page.after;
        let hi = ids.length;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if ((ids[mid] as string) <= after) lo = mid + 1;
          else hi = mid;
        }
      }
      return ids.slice(lo, lo + Math.max(0, page.limit));
    },
    async getEntry(index, userId) {
      const b = boards.get(index);
      const e = b?.users.get(userId)?.entry;
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
      const rows = boards.get(index)?.users.get(userId)?.rows ?? [];
      return rows.slice(Math.max(0, rows.length - limit)).reverse().map((r) => ({ ...r }));
    },
    async getCounters(names) {
      return Object.fromEntries(names.map((n) => [n, counters.get(n) ?? 0]));
    },
    // One seek per metric ledger of the user (a binary search), then a merge of their newest rows:
    // O(m log n + limit x m) for m metrics.
    async readEvents(userId, page): Promise<EventsPage> {
      const cursor = eventCursorOf(page.before);
      const mine = ledgers.get(userId);
      if (!mine) return { rows: [], next: null };
      const sources: { ledger: Ledger; end: number }[] = [];
      const consider = (ledger: Ledger | undefined) => {
        if (!ledger || ledger.kind !== 'metric') return;
        let end = ledger.length;
        if (cursor) {
          if (ledger.key === cursor.key) end = Math.min(end, ledger.lowerBound(cursor.ms) + cursor.ord);
          else end = ledger.lowerBound(ledger.key < cursor.key ? cursor.ms + 1 : cursor.ms);
        }
        if (end > 0) sources.push({ ledger, end });
      };
      if (page.metricKey !== undefined) consider(mine.ledger(ledgerKey('metric', page.metricKey)));
      else for (const ledger of mine.list) consider(ledger);
      const rows: LedgerRow[] = [];
      let last: { ledger: Ledger; pos: number } | null = null;
      const limit = Math.max(0, page.limit);
      while (rows.length < limit) {
        // The newest row among the sources' next ones: later instant first, then the greater key.
        let best: { ledger: Ledger; end: number } | null = null;
        let bestMs = -Infinity;
        for (const src of sources) {
          if (src.end === 0) continue;
          const ms = src.ledger.nums[(src.end - 1) * 3] as number;
          if (best === null || ms > bestMs || (ms === bestMs && src.ledger.key > best.ledger.key)) {
            best = src;
            bestMs = ms;
          }
        }
        if (best === null) break;
        best.end -= 1;
        rows.push(best.ledger.row(best.end));
        last = { ledger: best.ledger, pos: best.end };
      }
      if (last === null || !sources.some((src) => src.end > 0)) return { rows, next: null };
      const ms = last.ledger.nums[last.pos * 3] as number;
      return { rows, next: `${ms}.${last.pos - last.ledger.lowerBound(ms)}.${last.ledger.key}` };
    },
    async eraseUser(erasure) {
      return erase(erasure);
    },
    // O(log n + limit): a binary search in the system's sorted ids.
    async listBoosts(systemKey, page) {
      const ids = boostIds.get(systemKey);
      if (!ids) return [];
      const from = page.after === undefined ? 0 : seek(ids, page.after, true);
      return ids.slice(from, from + Math.max(0, page.limit)).map((id) => boostsById.get(id) as BoostRecord);
    },
    async getBoost(id) {
      return boostsById.get(id) ?? null;
    },
  };
  // The methods as made here: the direct path is only taken while the store's still are these.
  const ownCommit = store.commit;
  const ownLoad = store.loadForEvents;
  // Not enumerable: a store spread or listed shows only its Store methods.
  Object.defineProperty(store, DIRECT, { value: direct });
  return store;
}
