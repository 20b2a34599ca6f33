/**
 * The storage contract. Implement {@link Store} for any database; run the conformance suite from
 * `laurel/testing` against it. The engine is the only caller; stores never retry and never decide rules.
 */
import type { ConflictError } from '../errors.js';
import type { BoostRecord } from '../core/boosts.js';
import type { ChangeEvent, IdempotencyRecord, LedgerKind, LedgerRow, LeaderboardWrite, StoredChange, UserState } from '../core/types.js';

/** A user's state with the version it was stored at. Versions start at 1 and grow by 1 per commit. */
export interface VersionedState {
  /** The user's state. */
  state: UserState;
  /** The state's version: 1 after the user's first commit, + 1 with each commit. */
  version: number;
}

/** Everything one engine call writes, applied all together or not at all. */
export interface Commit {
  /** The user whose state the commit writes. */
  userId: string;
  /** The version the state was read at; 0 when the user did not exist. */
  expectedVersion: number;
  /** The user's new state, stored at `expectedVersion + 1`. */
  state: UserState;
  /** Ledger rows to append (events, awards, streak periods, operations). */
  ledger: LedgerRow[];
  /** Absolute writes of the user's board entries, in order. */
  leaderboard: LeaderboardWrite[];
  /**
   * Increments of named counters (`users`, `achievement:<key>`): safe integers, under names of well-formed text
   * of at most 1,000 characters without NUL. The built-in stores refuse anything else with a `ValidationError`
   * before any change.
   */
  counters: Record<string, number>;
  /** The idempotency record to store with it (its (user, metric, key) must not exist yet), or null. */
  idempotency: IdempotencyRecord | null;
  /**
   * Change events to append to the outbox in the same transaction (see {@link OutboxStore}); absent or empty:
   * none. A `leaderboard.rank_changed` event with `rank` is completed from this commit's rank changes first.
   * Events are immutable values once committed: the caller never changes them afterwards, so a store MAY keep
   * the event objects given (the memory store does) and MUST NOT change them.
   */
  changes?: ChangeEvent[];
  /**
   * The user's next due instant (ISO) for `claimDue`, null for none; absent: leave the stored one as it is.
   */
  due?: string | null;
}

/** The rank of one written entry before and after the commit (1-based over the whole index; null if absent). */
export interface RankChange {
  /** The board index written. */
  index: string;
  /** The user whose entry was written. */
  userId: string;
  /** The user's 1-based rank before the write, or null when they had no entry. */
  previousRank: number | null;
  /** The user's 1-based rank after the write, or null when they have no entry. */
  rank: number | null;
  /** The entry's value before the write, or null. */
  previousValue: number | null;
  /** The entry's value after the write, or null. */
  value: number | null;
  /**
   * When the write asked for it (`thresholdRank`): the value of the entry at that 1-based rank after the
   * write, 0 when the index holds fewer entries. Returned in the commit's own round trip, so the engine needs
   * no read after it. A store MAY leave it out; the engine then reads it with `readRange`.
   */
  threshold?: number;
}

/**
 * What `Store.commit` returns: the user's new version and, for each leaderboard write in order, the user's rank
 * and value before and after it.
 */
export interface CommitResult {
  version: number;
  ranks: RankChange[];
  /**
   * True when the commit is durable but the ranks could not be had (an external rank index failed after it;
   * `ranks` then reads null). The engine then reads no more ranks in that call.
   */
  ranksUnavailable?: boolean;
}

/** One idempotency record to look up with {@link Store.loadForEvents}. */
export interface IdempotencyLookup {
  /** The user. */
  userId: string;
  /** The metric. */
  metricKey: string;
  /** The idempotency key. */
  key: string;
}

/** What {@link Store.loadForEvents} returns: states and idempotency records, each in the order asked. */
export interface EventLoad {
  /** The users' versioned states, in the order asked (null for an unknown user). */
  users: (VersionedState | null)[];
  /** The idempotency records, in the order asked (null for none). */
  records: (IdempotencyRecord | null)[];
}

/**
 * The outcome of one commit of {@link Store.commitBatch}: its result, or the `ConflictError` it was refused
 * with (it then changed nothing).
 */
export type BatchCommitOutcome = CommitResult | ConflictError;

/** A range read of one user's ledger rows of one kind and key. */
export interface LedgerQuery {
  /** The user whose rows to read. */
  userId: string;
  /** The rows' kind. */
  kind: LedgerKind;
  /** The rows' key (a metric, a points system, ...). */
  key: string;
  /** Inclusive lower bound on `at` (ISO instant). */
  from?: string;
  /** Exclusive upper bound on `at` (ISO instant). */
  to?: string;
  /** By `at` ascending or descending (then insertion order, or its reverse). */
  order: 'asc' | 'desc';
  /** At most this many rows (default: all). */
  limit?: number;
}

/** A page of {@link Store.readUserLedger}. */
export interface LedgerPage {
  rows: LedgerRow[];
  /** The cursor after the last row returned; null when there are no more rows. */
  next: string | null;
}

/**
 * What {@link Store.eraseUser} removes: one user, everything a store keeps about them, with counter increments
 * applied in the same transaction. With `reset`, the user is then stored again as a new user.
 */
export interface Erasure {
  userId: string;
  /**
   * The version the user was read at. The erasure MUST be refused with `ConflictError`, changing nothing, when
   * the stored version differs (0: the user must not exist; erasing an absent user then changes nothing).
   */
  expectedVersion: number;
  /**
   * Counter increments applied with the erasure, e.g. `users: -1` and `achievement:<key>: -1` per achievement
   * the user held (the engine computes them from the user's state: stores decide no rules). Whole numbers
   * only, as a commit's `counters`.
   */
  counters: Record<string, number>;
  /**
   * A reset instead of an erasure: once everything of the user is removed (ledger, idempotency records, index
   * entries, rank history), the user is stored again at `expectedVersion + 1` with this state, these ledger
   * rows and these leaderboard writes, applied as a commit's (the writes' ranks are not returned).
   */
  reset?: { state: UserState; ledger: LedgerRow[]; leaderboard: LeaderboardWrite[]; changes?: ChangeEvent[]; due?: string | null };
}

/** What {@link Store.eraseUser} did. */
export interface ErasureResult {
  /** False when the user did not exist (`expectedVersion` 0): nothing was changed. */
  erased: boolean;
  /** The user's version afterwards: 0 after an erasure, `expectedVersion + 1` after a reset. */
  version: number;
  /**
   * Every index the user had an entry, rank history or a removed entry in before the erasure, in code-unit
   * order: where an external rank index (`withRankIndex`) must remove the user too.
   */
  indexes: string[];
  /**
   * True when the erasure is durable in the store but an external rank index could not be updated after it:
   * run `rebuildRankIndex` on `indexes` (see `withRankIndex`).
   */
  ranksUnavailable?: boolean;
}

/** A page of {@link Store.readEvents}. */
export interface EventsPage {
  /** Metric rows, newest first. */
  rows: LedgerRow[];
  /** The cursor after the last row returned; null when there are no more rows. */
  next: string | null;
}

/** An index entry with its 1-based rank. */
export interface RankedEntry {
  /** The entry's user. */
  userId: string;
  /** The entry's value. */
  value: number;
  /** When the user reached the value (ISO instant): the earlier ranks first on equal values. */
  reachedAt: string;
  /** The entry's 1-based rank. */
  rank: number;
}

/** One day of a user's rank history in one index. */
export interface RankHistoryRow {
  /** The local date of the day the row covers. */
  date: string;
  /** The rank before the day's first write, or null. */
  previousRank: number | null;
  /** The rank after the day's last write, or null. */
  rank: number | null;
  /** The value before the day's first write, or null. */
  previousValue: number | null;
  /** The value after the day's last write, or null. */
  value: number | null;
}

/**
 * A Laurel store. Ordering of every index: higher `value` first; equal values by earlier `reachedAt`
 * (ISO strings compare as instants); then by `userId` (code-unit order).
 */
export interface Store extends Partial<OutboxStore> {
  /**
   * Loads a user's state and version. MUST return null for an unknown user.
   * States are immutable values: the caller never mutates a loaded state, so a store MAY hand out the very
   * object it keeps (the memory store does, frozen outside production); it MUST NOT change a state it handed out.
   */
  loadUser(userId: string): Promise<VersionedState | null>;

  /** Loads several users at once (order of `userIds`, null for unknown ones). Same rules as `loadUser`. */
  loadUsers(userIds: readonly string[]): Promise<(VersionedState | null)[]>;

  /**
   * OPTIONAL. `loadUsers(userIds)` and `getIdempotencyRecord` for each of `lookups`, read together (one round
   * trip on PostgreSQL). The engine uses it when present, else the two separate reads; both MUST give the
   * same answers.
   */
  loadForEvents?(userIds: readonly string[], lookups: readonly IdempotencyLookup[]): Promise<EventLoad>;

  /** The idempotency record for (user, metric, key), or null. Records MUST be kept forever. */
  getIdempotencyRecord(userId: string, metricKey: string, key: string): Promise<IdempotencyRecord | null>;

  /**
   * Applies one call's writes.
   * - MUST apply the user state, the ledger rows, the leaderboard writes, the counter increments and the
   *   idempotency record atomically: all of them, or none.
   * - MUST throw `ConflictError` and change nothing when the stored version is not `expectedVersion`
   *   (with `expectedVersion` 0: when the user already exists), or when the idempotency record's
   *   (user, metric, key) already exists.
   * - MUST store the state at `expectedVersion + 1` and return that version.
   * - Leaderboard writes set absolute values: a write MUST replace the user's entry in that index (never
   *   add to it); `remove: true` MUST delete it. Re-applying the same write MUST leave the index unchanged.
   * - MUST return, for each leaderboard write in order, the user's rank and value before and after it, and
   *   MUST keep one rank-history row per (index, user, date): the first write of a day sets its
   *   `previousRank`/`previousValue`, every write of the day sets `rank`/`value`. For an `unranked` write
   *   it MAY return nulls (ranks and values alike) and skip the history row.
   * - MUST keep the runtime boosts its `operation` ledger rows make, in the same transaction (read by
   *   `listBoosts` and `getBoost`): a row with key `createBoost` stores `data.result.boost` (a `BoostRecord`)
   *   under its id; a row with key `deleteBoost` removes the user's boost `data.id`. Removing a user's ledger
   *   (`eraseUser`) removes their boosts.
   * - MUST NOT retry; the engine decides about retries.
   * - MUST NOT mutate the objects passed in. `state` is an immutable value the store MAY keep and hand out
   *   again; the ledger rows, writes and records MUST NOT be kept by reference (the caller may reuse them).
   */
  commit(commit: Commit): Promise<CommitResult>;

  /**
   * OPTIONAL. Applies `commits` in order, as `commit` would one after another, in as few round trips and
   * transactions as the store allows (one on PostgreSQL): the path of `Engine.recordEvents`.
   * - Each commit is atomic on its own: applied whole, or refused with a `ConflictError` in its slot of the
   *   result, having changed nothing. A refused commit does not stop the others.
   * - Several commits of one user come with consecutive expected versions. Once one of them is refused, the
   *   store MUST refuse every later commit of that user in the batch as well, even one whose expected
   *   version happens to match again (another writer may have moved the user by exactly one version).
   * - Any other failure (a server fault) rejects the whole call; the store MUST then have applied either all
   *   the commits it would have applied, or none of them, and MAY leave it unknown which (as `commit`).
   * - SHOULD report `threshold` for every write that asks for it (`thresholdRank`): the engine otherwise reads
   *   thresholds after the whole batch, which differs from one by one when a board is full.
   */
  commitBatch?(commits: readonly Commit[]): Promise<BatchCommitOutcome[]>;

  /**
   * Ledger rows of one user, kind and key with `from <= at < to`, ordered by `at` (then insertion order).
   * Rows are immutable: a store MAY return frozen shared objects; callers MUST NOT mutate them.
   * MUST cost in proportion to the rows returned (plus a logarithmic seek), never to the user's whole ledger.
   */
  readLedger(query: LedgerQuery): Promise<LedgerRow[]>;

  /**
   * One page of a user's whole ledger, every kind and key, in commit order (the rows of one commit in the
   * order the commit listed them), starting after the opaque cursor `after` (from the start without it).
   * `next` is the cursor to pass for the following page, null after the last row. Replay reads a user's
   * history with it. MUST cost in proportion to the rows returned (plus a logarithmic seek).
   */
  readUserLedger(userId: string, page: { after?: string; limit: number }): Promise<LedgerPage>;

  /**
   * Ids of stored users in code-unit order, strictly after `after` (from the first without it), at most
   * `limit`. Replay walks every user with it and resumes from the last id it finished. MUST cost in
   * proportion to the ids returned (plus a logarithmic seek).
   */
  listUsers(page: { after?: string; limit: number }): Promise<string[]>;

  /**
   * One user's entry in an index with its rank, or null. SHOULD cost O(log n) (the memory store and the
   * Redis rank index do; the Postgres store's SQL ranks count an index range, O(rank)).
   */
  getEntry(index: string, userId: string): Promise<RankedEntry | null>;

  /** `limit` entries from 0-based position `offset`, in rank order. SHOULD cost O(log n + limit) (see `getEntry`). */
  readRange(index: string, offset: number, limit: number): Promise<RankedEntry[]>;

  /** Number of entries in an index; with `min`/`max`, of those with `min <= value < max`. */
  countEntries(index: string, range?: { min?: number; max?: number }): Promise<number>;

  /** The latest `limit` rank-history rows of a user in an index, newest first. */
  readRankHistory(index: string, userId: string, limit: number): Promise<RankHistoryRow[]>;

  /** Current values of named counters (0 for unknown names). */
  getCounters(names: readonly string[]): Promise<Record<string, number>>;

  /**
   * One page of a user's metric rows (kind `metric`; of one metric with `metricKey`, else of every metric),
   * newest first: by `at` descending, rows of one instant by metric key descending (code-unit order), then in
   * reverse commit order. Starts after the opaque cursor `before` (at the newest row without it); `next` is
   * the cursor for the following page, null exactly after the last row. A cursor is a place in that order,
   * valid with or without `metricKey`, and stays valid as rows are added. A malformed cursor MUST fail with
   * `ValidationError`. MUST cost in proportion to the rows returned plus a logarithmic seek (the memory store:
   * one seek per metric of the user), with or without `metricKey`.
   */
  readEvents(userId: string, page: { metricKey?: string; before?: string; limit: number }): Promise<EventsPage>;

  /**
   * Erases a user (right to erasure), or resets them with `erasure.reset`. Atomically (one transaction on
   * PostgreSQL), it MUST:
   * - refuse with `ConflictError`, changing nothing, when the stored version is not `expectedVersion`;
   * - remove the user's state (an erasure: `loadUser` then answers null and `listUsers` skips the id; a reset
   *   stores `reset.state` at `expectedVersion + 1`), every ledger row of the user, every idempotency record
   *   of the user, the user's entry in every index (board runs of all time, points totals, attribute totals:
   *   whatever index holds one) and every rank-history row of the user;
   * - apply the `counters` increments;
   * - with `reset`, then apply its ledger rows and leaderboard writes as a commit of `reset.state` would.
   * Ranks of the others close the gap (the entries are gone). Index sizes a store keeps for thresholds follow.
   * A later commit with `expectedVersion` 0 creates a brand-new user under the same id.
   * - remove every runtime boost of the user (`listBoosts` and `getBoost` no longer show them; a reset too).
   * - with an outbox ({@link OutboxStore}): remove every change event about the user (`userId`), delivered or
   *   not, and their due instant (a reset then sets the due instant `reset.due`, when given); a reset
   *   appends `reset.changes` as a commit would. An erasure (not a reset) also removes the user's entries
   *   (`userId`) from `payload.leaderboard.rankings` of the events of no user of types `leaderboard.started`,
   *   `leaderboard.finished` and `leaderboard.changed` (the other entries as they were) and forgets the
   *   marks whose name starts with `leaderboard.changed|` and whose value holds the user's id as JSON text.
   * Whatever else a store keeps per user in the future MUST be removed here too.
   */
  eraseUser(erasure: Erasure): Promise<ErasureResult>;

  /**
   * Runtime boosts of one points system (see `commit`), in ascending id order (code-unit order for the ASCII
   * ids `newId` gives), strictly after the id `after` (from the first without it), at most `limit`. MUST
   * cost in proportion to the boosts returned (plus a logarithmic seek).
   */
  listBoosts(systemKey: string, page: { after?: string; limit: number }): Promise<BoostRecord[]>;

  /** One runtime boost by its id, or null (unknown or deleted). SHOULD cost O(log n). */
  getBoost(id: string): Promise<BoostRecord | null>;

  /**
   * OPTIONAL: multi-tenancy (`Engine.tenant`, the HTTP `Tenant-ID` header). The store of tenant `id` over the
   * same storage: a {@link Store} (with the same optional parts as this one) whose users, states, ledger,
   * idempotency records, indexes and rank history, counters, boosts, and outbox (events, consumers, marks,
   * deliveries, due instants) are disjoint from every other tenant's and from the default tenant's (the store
   * this is called on when it is not itself a tenant's). Every read of a tenant's store sees only that
   * tenant's data and MUST stay tenant-local in cost (an index that leads with the tenant, a partition, or a
   * key prefix): no read may cost in proportion to another tenant's data.
   * - `id` is 1..255 characters of well-formed text without NUL (the engine checks it); ids are compared as
   *   strings, exactly (no case folding or trimming).
   * - Calling `tenant` on a tenant's store returns the store of tenant `id` of the same storage (tenants do
   *   not nest).
   * - Ids inside a tenant (user ids, index names, counter names, consumer names, marks, boost ids as far as
   *   `getBoost` goes) are the tenant's own: the same user id in two tenants is two users.
   * - Cheap to call: it allocates no storage until the tenant's store is written to.
   */
  tenant?(id: string): Store;
}

/** A page of {@link OutboxStore.readChanges}. */
export interface ChangesPage {
  events: StoredChange[];
  /** The cursor to pass as `after` next time: after the last event returned, or `after` itself when none were. */
  next: string;
}

/** The outcome of one delivery attempt of a change event to a webhook (or any consumer that records them). */
export interface DeliveryRecord {
  consumer: string;
  eventId: string;
  /** 1 for the first attempt. */
  attempt: number;
  ok: boolean;
  /** The HTTP status, null when there was no answer (a timeout, a refused connection). */
  status: number | null;
  error: string | null;
  /** ISO instant of the attempt. */
  at: string;
  /** How long the attempt took, in milliseconds. */
  ms: number;
}

/**
 * The change-notification half of a store (issue 15): a transactional outbox, durable consumer cursors with
 * leases, marks for changes that no user's commit causes, and an index of users' next due instants. The
 * memory and PostgreSQL stores implement it; the engine's `readChanges`, `subscribe`, `sweep` and webhook
 * relay need it. Instants passed in (`now`) come from the engine's clock: stores never read their own.
 */
export interface OutboxStore {
  /**
   * Change events in commit order, strictly after the cursor `after` (from the oldest kept without it), at
   * most `limit`. Commit order: an event a reader has been given a cursor past can never appear before that
   * cursor later (on PostgreSQL an event of a transaction still open is held back until it ends). Events of
   * one commit keep the order the commit listed them in. A malformed cursor MUST fail with `ValidationError`.
   * MUST cost in proportion to the events returned plus a logarithmic seek.
   */
  readChanges(page: { after?: string; limit: number }): Promise<ChangesPage>;

  /**
   * Takes or renews the lease of consumer `consumer` for `owner` until `now + leaseMs`: granted when nobody
   * holds it, `owner` holds it, or the holder's lease ended at or before `now`. Returns the consumer's stored
   * cursor (null before its first `advanceConsumer`), or null when another owner holds the lease.
   */
  claimConsumer(lease: { consumer: string; owner: string; now: string; leaseMs: number }): Promise<{ cursor: string | null } | null>;

  /**
   * Stores `cursor` as the consumer's cursor and renews the lease until `now + leaseMs`, only if `owner` holds
   * the lease (even an ended one nobody took since); returns false, changing nothing, otherwise.
   */
  advanceConsumer(update: { consumer: string; owner: string; cursor: string; now: string; leaseMs: number }): Promise<boolean>;

  /** Ends `owner`'s lease of `consumer` (nothing when it holds none). The cursor stays. */
  releaseConsumer(lease: { consumer: string; owner: string }): Promise<void>;

  /** Stored values of marks (absent marks are left out). */
  getMarks(marks: readonly string[]): Promise<Record<string, string>>;

  /**
   * Atomically: when mark `mark` holds `expected` (null: the mark is absent), sets it to `value`, appends
   * `changes` to the outbox, and returns true; otherwise changes nothing and returns false. How sweeps emit a
   * board run's or a boost's changes exactly once, whichever process gets there first.
   */
  appendChanges(entry: { mark: string; expected: string | null; value: string; changes: readonly ChangeEvent[] }): Promise<boolean>;

  /**
   * Users whose due instant (`Commit.due`) is at or before `now`, earliest first (ties by user id in
   * code-point order, which is UTF-8 byte order: PostgreSQL's "C" collation), at most `limit`; each one
   * returned gets the due instant `now + leaseMs` in the same step, so concurrent callers never get the same
   * user while its lease lasts (SKIP LOCKED on PostgreSQL). MUST cost in proportion to the users returned plus
   * a logarithmic seek, never to the number of users.
   */
  claimDue(claim: { now: string; limit: number; leaseMs: number }): Promise<string[]>;

  /**
   * Removes the oldest change events in commit order that are dated (`at`) before `before`, stopping at the
   * first one that is not (an event written late but dated long ago is never removed before the events
   * written ahead of it), at most `limit` of them; returns how many. Also removes at most `limit` delivery
   * outcomes dated before `before`, oldest first (retention of `recordDeliveries`, not counted).
   */
  pruneChanges(prune: { before: string; limit: number }): Promise<number>;

  /** Appends delivery outcomes. */
  recordDeliveries(records: readonly DeliveryRecord[]): Promise<void>;

  /** The latest `limit` delivery outcomes of a consumer, newest first. */
  readDeliveries(query: { consumer: string; limit: number }): Promise<DeliveryRecord[]>;
}
