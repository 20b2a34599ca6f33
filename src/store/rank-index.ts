/**
 * An external rank index: a store keeps its own authoritative entries, and a faster ordered structure
 * (e.g. Redis sorted sets, `laurel/redis`) answers ranks and pages. `withRankIndex` joins the two.
 */
import type { ChangeEvent, LeaderboardWrite } from '../core/types.js';
import { storageError, ValidationError } from '../errors.js';
import { isMarked, settleChanges } from './outbox.js';
import type { Commit, CommitResult, OutboxStore, RankChange, RankedEntry, RankHistoryRow, Store, VersionedState } from './types.js';

/** Every method of {@link OutboxStore} (a missing one fails to compile), forwarded by `withRankIndex`. */
const OUTBOX_METHODS: Record<keyof OutboxStore, true> = {
  readChanges: true,
  claimConsumer: true,
  advanceConsumer: true,
  releaseConsumer: true,
  getMarks: true,
  appendChanges: true,
  claimDue: true,
  pruneChanges: true,
  recordDeliveries: true,
  readDeliveries: true,
};

/** A leaderboard write tagged with the user's committed version, so late writes never undo newer ones. */
export type VersionedWrite = LeaderboardWrite & { version: number };

/** The ordered-index half of the Store contract, with the same ordering and history rules. */
export interface RankIndex {
  /**
   * Applies absolute writes and returns each one's rank before and after (in the order of `writes`).
   * MUST apply writes to the same (index, user) in the order given; MAY apply writes to different ones
   * concurrently. MUST ignore a write whose `version` is lower than the version already applied for
   * (index, user), also after that entry was removed. MUST be idempotent: applying the same write twice
   * leaves the index as after the first. SHOULD bound its time and reject with `StorageUnavailableError`
   * when the index cannot answer (the Redis index does, see `timeoutMs`); a write it gave up on MAY still
   * land later, which the version rule makes harmless. For a write with `thresholdRank` it SHOULD return
   * `threshold` as `Store.commit` describes (the value at that rank right after the write, 0 when the index
   * holds fewer entries); without it the engine reads the threshold itself. `withRankIndex` passes all the
   * writes of a commit, or of a whole `commitBatch`, in one call: an index SHOULD answer it in one round trip.
   */
  apply(writes: readonly VersionedWrite[]): Promise<RankChange[]>;
  /**
   * OPTIONAL. The rank changes that applying `writes` in order would give right now (each write counting, as
   * if its version were the newest), without changing anything: what `apply` would return for them, minus
   * `threshold`. An `unranked` write reads null ranks. A later write in `writes` sees the earlier ones (also
   * those of other users). `withRankIndex` calls it before the store's commit to complete the commit's
   * `leaderboard.rank_changed` events (`ChangeEvent.rank`), so they are stored atomically with it. SHOULD
   * answer in one round trip and bound its time as `apply` does. Without it those events read null ranks
   * (and are dropped, as the ranks did not change).
   */
  preview?(writes: readonly LeaderboardWrite[]): Promise<RankChange[]>;
  /** One user's entry in an index with its rank, or null (as `Store.getEntry`). */
  getEntry(index: string, userId: string): Promise<RankedEntry | null>;
  /** `limit` entries from 0-based position `offset`, in rank order (as `Store.readRange`). */
  readRange(index: string, offset: number, limit: number): Promise<RankedEntry[]>;
  /** Number of entries in an index; with `min`/`max`, of those with `min <= value < max` (as `Store.countEntries`). */
  countEntries(index: string, range?: { min?: number; max?: number }): Promise<number>;
  /** The latest `limit` rank-history rows of a user in an index, newest first (as `Store.readRankHistory`). */
  readRankHistory(index: string, userId: string, limit: number): Promise<RankHistoryRow[]>;
  /**
   * One page of the users that hold an entry in `index`, each with the version of the write that set it:
   * the index's side of `rebuildRankIndex`. Start with cursor `'0'`; the scan is complete when the returned
   * cursor is `'0'` again. `count` is a hint for the page size.
   * - MUST return, at least once over a complete scan, every user that holds an entry for the whole scan.
   * - MUST NOT return a user whose entry was removed before the scan started (a removal the index remembers
   *   only to refuse older writes is no entry).
   * - MAY return a user more than once, and MAY or MAY NOT return users whose entries change during the scan.
   * - Cost: O(count) per page (plus what the index holds for removed entries), never O(n) in one call.
   */
  scanUsers(index: string, cursor: string, count: number): Promise<{ cursor: string; users: { userId: string; version: number }[] }>;
  /**
   * Forgets a user in each of `indexes`: their entry, their rank history and what the index remembers of a
   * removed entry, whatever their versions (the store erased the user first: `Store.eraseUser`). Without
   * `version` (an erasure) nothing of the user is left there, so a new user under the same id, whose versions
   * start at 1 again, is not refused as stale; with `version` (a reset: the user lives on at that version)
   * the index remembers a removal at that version, so writes older than the reset that arrive late are still
   * refused. MUST be idempotent. SHOULD bound its time as `apply` does.
   */
  erase(userId: string, indexes: readonly string[], version?: number): Promise<void>;
  /**
   * OPTIONAL: the rank index of tenant `id` (see `Store.tenant`): the same rules, over entries disjoint from
   * every other tenant's and the default tenant's (the Redis index: a key prefix per tenant). Tenants do not
   * nest. `withRankIndex` offers `tenant` only when both the store and the index have it.
   */
  tenant?(id: string): RankIndex;
}

/** Options of {@link withRankIndex}. */
export interface WithRankIndexOptions {
  /**
   * Called when the rank index fails after the store committed. The call still succeeds (its writes are
   * durable in the store) with null ranks; the index catches up at the user's next write to that board.
   * After an erasure (`eraseUser`) there is no next write: the result then has `ranksUnavailable`, and
   * `rebuildRankIndex` of each of its `indexes` takes the user out of the rank index.
   */
  onError?: (error: unknown) => void;
}

/**
 * A store whose ranks, pages, counts and rank history come from `rankIndex`. The store's commit stays the
 * single atomic write; the index is updated right after it with version-guarded absolute values, so
 * retries, races between processes and replays cannot leave it behind a newer value.
 *
 * Change events (`Commit.changes`): a `leaderboard.rank_changed` event the store would complete from its own
 * ranks (`ChangeEvent.rank`) is completed before the store's commit instead, from `rankIndex.preview` of the
 * commit's writes (one more rank-index round trip, only for commits with such events), so the store keeps it
 * atomically with the commit. Its ranks are those of the index just before the commit: a write of another
 * process landing in between can make them differ from the ranks the call returns. When the index has no
 * `preview` or it fails (`onError` hears of it), the commit still goes through, without those events.
 * `commitBatch` previews the whole batch's writes in one call, in order; a reset (`eraseUser`) its writes
 * after the erasure of the user's entries.
 *
 * `loadForEvents` and `commitBatch` are there when the store has them. `commitBatch` is one `commitBatch` on
 * the store, then one `rankIndex.apply` for the leaderboard writes of every commit that went through (each
 * tagged with its commit's version): one rank-index round trip for the whole batch (on Redis, one per 1000
 * writes), with the rank changes sequential commits would get. Commits the store refused
 * keep their `ConflictError`. If the index fails after the store committed, every committed slot reads null
 * ranks with `ranksUnavailable` (as `commit` does) and `onError` hears of it once.
 *
 * `eraseUser` erases (or resets) the user in the store first, which lists every index the user had an entry,
 * rank history or a removed entry in; then `rankIndex.erase` forgets the user in those indexes (and a reset's
 * own writes are applied at its version). If the rank index fails then, the erasure is still durable in the
 * store, which is the source of truth: the result has `ranksUnavailable`, `onError` hears of it, and until
 * `rebuildRankIndex` has run on each of the result's `indexes` (it drops entries of users the store does not
 * know), the rank index still shows the user's old entries in pages and counts.
 */
export function withRankIndex(store: Store, rankIndex: RankIndex, options: WithRankIndexOptions = {}): Store {
  const onError = options?.onError;
  /** The result of a durable commit whose ranks the index could not give: null ranks, `ranksUnavailable`. */
  const unavailable = (c: Commit, version: number): CommitResult => ({
    version,
    ranks: c.leaderboard.map((w) => ({ index: w.index, userId: w.userId, previousRank: null, rank: null, previousValue: null, value: w.remove ? null : w.value })),
    ranksUnavailable: true,
  });
  /** Reports a rank-index failure after a durable commit. Nothing may turn that call into a failure (a retry would count the event twice), not even an observer that throws. */
  const report = (error: unknown) => {
    try {
      onError?.(error);
    } catch {
      // ignored, see above
    }
  };
  /**
   * The changes of each part (a commit's, in the order they will be applied; `clear`: a reset's, whose
   * writes follow the erasure of the user's entries) with their `leaderboard.rank_changed` events completed
   * as the store would from its own ranks (`settleChanges`), from one `rankIndex.preview` of every part's
   * writes to the indexes those events name; undefined for a part without such events (it goes as it is).
   * The store then keeps them atomically with the commit. When the index has no `preview`, or it fails
   * (reported to `onError`: the commit still goes through), the events read null ranks and are dropped.
   */
  const settleRanks = async (parts: readonly { userId: string; leaderboard: readonly LeaderboardWrite[]; changes?: readonly ChangeEvent[] | undefined; clear?: boolean }[]): Promise<(ChangeEvent[] | undefined)[]> => {
    const out: (ChangeEvent[] | undefined)[] = parts.map(() => undefined);
    const indexes = new Set<string>();
    for (const part of parts) for (const e of part.changes ?? []) if (isMarked(e)) indexes.add(e.rank.index);
    if (indexes.size === 0) return out;
    const writes: LeaderboardWrite[] = [];
    const spans: { start: number; end: number }[] = [];
    for (const part of parts) {
      if (part.clear) {
        const date = new Date().toISOString().slice(0, 10);
        for (const index of indexes) writes.push({ index, userId: part.userId, remove: true, date, unranked: true });
      }
      const start = writes.length;
      for (const w of part.leaderboard) if (indexes.has(w.index)) writes.push(w);
      spans.push({ start, end: writes.length });
    }
    let ranks: RankChange[] = [];
    if (writes.length > 0 && typeof rankIndex.preview === 'function') {
      try {
        const previewed = await rankIndex.preview(writes);
        if (!Array.isArray(previewed) || previewed.length !== writes.length) throw new Error(`rank index preview answered ${Array.isArray(previewed) ? previewed.length : 'no'} rank changes for ${writes.length} writes`);
        ranks = previewed;
      } catch (error) {
        report(error);
      }
    }
    parts.forEach((part, i) => {
      if (!part.changes?.some(isMarked)) return;
      const span = spans[i] as { start: number; end: number };
      out[i] = settleChanges(part.changes, ranks.slice(span.start, span.end), part.userId);
    });
    return out;
  };
  const wrapped: Store = {
    loadUser: (id) => store.loadUser(id),
    loadUsers: (ids) => store.loadUsers(ids),
    getIdempotencyRecord: (u, m, k) => store.getIdempotencyRecord(u, m, k),
    readLedger: (q) => store.readLedger(q),
    readUserLedger: (userId, page) => store.readUserLedger(userId, page),
    listUsers: (page) => store.listUsers(page),
    getCounters: (names) => store.getCounters(names),
    async commit(c) {
      // The rank_changed events (`ChangeEvent.rank`) are completed from the rank index before the store
      // commits them: a store without SQL ranks stores them as given.
      const [changes] = await settleRanks([c]);
      const result = await store.commit(changes === undefined ? c : { ...c, changes });
      if (c.leaderboard.length === 0) return result;
      try {
        const ranks = await rankIndex.apply(c.leaderboard.map((w) => ({ ...w, version: result.version })));
        return { version: result.version, ranks };
      } catch (error) {
        report(error);
        return unavailable(c, result.version);
      }
    },
    getEntry: (index, userId) => rankIndex.getEntry(index, userId),
    readRange: (index, offset, limit) => rankIndex.readRange(index, offset, limit),
    countEntries: (index, range) => rankIndex.countEntries(index, range),
    readRankHistory: (index, userId, limit) => rankIndex.readRankHistory(index, userId, limit),
    readEvents: (userId, page) => store.readEvents(userId, page),
    listBoosts: (systemKey, page) => store.listBoosts(systemKey, page),
    getBoost: (id) => store.getBoost(id),
    async eraseUser(e) {
      // A reset's rank_changed events are completed as a commit's, its writes following the erasure.
      const [changes] = e.reset ? await settleRanks([{ userId: e.userId, leaderboard: e.reset.leaderboard, changes: e.reset.changes, clear: true }]) : [];
      const result = await store.eraseUser(changes === undefined || !e.reset ? e : { ...e, reset: { ...e.reset, changes } });
      if (!result.erased) return result;
      try {
        if (result.indexes.length > 0) await rankIndex.erase(e.userId, result.indexes, e.reset ? result.version : undefined);
        if (e.reset && e.reset.leaderboard.length > 0) await rankIndex.apply(e.reset.leaderboard.map((w) => ({ ...w, version: result.version })));
      } catch (error) {
        report(error);
        return { ...result, ranksUnavailable: true };
      }
      return result;
    },
  };
  // A tenant's store pairs the store's tenant with the index's: both partition, or neither may (a store's
  // tenants over one shared rank index would share boards).
  if (typeof store.tenant === 'function' && typeof rankIndex.tenant === 'function') {
    const tenants = new Map<string, Store>();
    const storeOf = store.tenant.bind(store);
    const indexOf = rankIndex.tenant.bind(rankIndex);
    wrapped.tenant = (id) => {
      let t = tenants.get(id);
      if (!t) tenants.set(id, (t = withRankIndex(storeOf(id), indexOf(id), options)));
      return t;
    };
  }
  if (typeof store.loadForEvents === 'function') {
    const loadForEvents = store.loadForEvents.bind(store);
    wrapped.loadForEvents = (userIds, lookups) => loadForEvents(userIds, lookups);
  }
  // The outbox stays in the store (PostgreSQL with Redis ranks keeps it in PostgreSQL): forwarded as it is.
  for (const name of Object.keys(OUTBOX_METHODS) as (keyof OutboxStore)[]) {
    const method = store[name];
    if (typeof method === 'function') (wrapped as unknown as Record<string, unknown>)[name] = method.bind(store);
  }
  if (typeof store.commitBatch === 'function') {
    const commitBatch = store.commitBatch.bind(store);
    wrapped.commitBatch = async (commits) => {
      // The commits' rank_changed events, as in `commit`: one preview of the whole batch's writes in order, so
      // a user's later commit sees the earlier ones (a commit the store then refuses counts in it all the same).
      const settled = await settleRanks(commits);
      const outcomes = await commitBatch(settled.some((changes) => changes !== undefined) ? commits.map((c, i) => (settled[i] === undefined ? c : { ...c, changes: settled[i] })) : commits);
      // One rank-index call for the leaderboard writes of every commit that went through, each write tagged
      // with its own commit's version; a refused commit (its ConflictError) keeps its slot as it is.
      const writes: VersionedWrite[] = [];
      const spans: { slot: number; start: number }[] = [];
      outcomes.forEach((outcome, slot) => {
        const c = commits[slot] as Commit;
        if (outcome instanceof Error || c.leaderboard.length === 0) return;
        spans.push({ slot, start: writes.length });
        for (const w of c.leaderboard) writes.push({ ...w, version: outcome.version });
      });
      if (spans.length === 0) return outcomes;
      const out = outcomes.slice();
      try {
        const ranks = await rankIndex.apply(writes);
        for (const { slot, start } of spans) {
          const c = commits[slot] as Commit;
          out[slot] = { version: (outcomes[slot] as CommitResult).version, ranks: ranks.slice(start, start + c.leaderboard.length) };
        }
      } catch (error) {
        report(error);
        for (const { slot } of spans) out[slot] = unavailable(commits[slot] as Commit, (outcomes[slot] as CommitResult).version);
      }
      return out;
    };
  }
  return wrapped;
}

/**
 * What `rebuildRankIndex` reads: the store's own, authoritative entries (the Postgres store is one). Pass the
 * store itself, never the `withRankIndex` wrapper (whose reads come from the rank index).
 */
export interface RankIndexSource {
  /**
   * One page of an index in rank order, each entry with its user's committed version.
   * MUST read each entry and its version together (one snapshot), so an entry is never paired with a version
   * older than the commit that wrote it.
   */
  scanEntries(index: string, offset: number, limit: number): Promise<(RankedEntry & { version: number })[]>;
  /** Users' committed versions (as `Store.loadUsers`: in order, null for an unknown user). MUST read committed data. */
  loadUsers(userIds: readonly string[]): Promise<(VersionedState | null)[]>;
  /** A user's entry in an index (as `Store.getEntry`), from the store's own entries. MUST read committed data. */
  getEntry(index: string, userId: string): Promise<RankedEntry | null>;
}

/**
 * Rebuilds one index of a rank index from the store's authoritative entries, e.g. after Redis lost its data
 * or missed writes while it was down. When the store's index does not change during the rebuild, the rank
 * index afterwards holds exactly the store's entries (same users, values, reachedAt, order). Writes that land
 * during it are never undone: every write carries the version its value belongs to, and the version guard of
 * `RankIndex.apply` refuses it if a newer write got there first.
 *
 * 1. Copy: every entry of the store's index, with its user's committed version.
 * 2. Prune: every user the rank index holds (`scanUsers`) that the copy did not see is checked again in the
 *    store, version first (`loadUsers`), entry second (`getEntry`): still absent, it is removed with that
 *    version (a commit that put it back since has a higher one and wins); present after all (it moved during
 *    the copy's paging), it is copied with that version. A user the store does not know at all (erased, e.g.
 *    while the rank index was down) is forgotten there entirely (`erase`): nothing of an erased user stays,
 *    and the same id created again starts at version 1 without being refused as stale.
 *
 * Rank history is not rewritten. Returns the number of entries copied (step 1).
 * Cost: O(n) reads and writes and O(n) memory (the copied user ids) in the index's size: a maintenance
 * operation, not a per-request one. Under heavy concurrent change the offset-paged copy can miss an entry
 * that moved while it paged (the prune step catches those the rank index holds): run it again, or in a quiet
 * moment, when exactness matters. It rejects (`StorageUnavailableError` from the Redis index) if the rank
 * index fails meanwhile; running it again is safe.
 */
export async function rebuildRankIndex(source: RankIndexSource, rankIndex: RankIndex, index: string, options: { batch?: number } = {}): Promise<number> {
  const batch = options?.batch ?? 1000;
  if (!Number.isInteger(batch) || batch < 1 || batch > 100_000) throw new ValidationError(`batch must be an integer from 1 to 100000 (got ${String(batch)})`, [{ path: ['batch'], message: 'must be an integer from 1 to 100000' }]);
  if (typeof index !== 'string' || index.length === 0) throw new ValidationError('index must be a non-empty string', [{ path: ['index'], message: 'must be a non-empty string' }]);
  try {
    return await rebuild(source, rankIndex, index, batch);
  } catch (error) {
    throw storageError('rebuildRankIndex', error);
  }
}

async function rebuild(source: RankIndexSource, rankIndex: RankIndex, index: string, batch: number): Promise<number> {
  const copiedUsers = new Set<string>();
  const date = new Date().toISOString().slice(0, 10);
  let copied = 0;
  for (let offset = 0; ; offset += batch) {
    const page = await source.scanEntries(index, offset, batch);
    if (page.length === 0) break;
    for (const e of page) copiedUsers.add(e.userId);
    await rankIndex.apply(page.map((e) => ({ index, userId: e.userId, value: e.value, reachedAt: e.reachedAt, date: e.reachedAt.slice(0, 10), version: e.version, unranked: true })));
    copied += page.length;
    if (page.length < batch) break;
  }
  let cursor = '0';
  do {
    const page = await rankIndex.scanUsers(index, cursor, batch);
    cursor = page.cursor;
    const extra = new Map<string, number>();
    for (const u of page.users) if (!copiedUsers.has(u.userId)) extra.set(u.userId, u.version);
    if (extra.size === 0) continue;
    const ids = [...extra.keys()];
    // Version first, entry second: an entry that comes back after the version was read comes with a newer version.
    const states = await source.loadUsers(ids);
    const writes: VersionedWrite[] = [];
    const unknown: string[] = [];
    for (const [i, userId] of ids.entries()) {
      const version = states[i]?.version ?? (extra.get(userId) as number);
      const entry = await source.getEntry(index, userId);
      if (entry && states[i]) {
        copiedUsers.add(userId);
        writes.push({ index, userId, value: entry.value, reachedAt: entry.reachedAt, date: entry.reachedAt.slice(0, 10), version, unranked: true });
      } else if (!entry && !states[i]) {
        unknown.push(userId);
      } else if (!entry) {
        writes.push({ index, userId, remove: true, date, version, unranked: true });
      }
      // (An entry for a user that was unknown a moment ago was just created: its own write carries its version.)
    }
    if (writes.length > 0) await rankIndex.apply(writes);
    for (const userId of unknown) await rankIndex.erase(userId, [index]);
  } while (cursor !== '0');
  return copied;
}
