/**
 * An external rank index: a store keeps its own authoritative entries, and a faster ordered structure
 * (e.g. Redis sorted sets, `laurel/redis`) answers ranks and pages. `withRankIndex` joins the two.
 */
import type { LeaderboardWrite } from '../core/types.js';
import type { RankChange, RankedEntry, RankHistoryRow, Store } from './types.js';

/** A leaderboard write tagged with the user's committed version, so late writes never undo newer ones. */
export type VersionedWrite = LeaderboardWrite & { version: number };

/** The ordered-index half of the Store contract, with the same ordering and history rules. */
export interface RankIndex {
  /**
   * Applies absolute writes in order and returns each one's rank before and after.
   * MUST ignore a write whose `version` is lower than the version already applied for (index, user).
   * MUST be idempotent: applying the same write twice leaves the index as after the first.
   */
  apply(writes: readonly VersionedWrite[]): Promise<RankChange[]>;
  getEntry(index: string, userId: string): Promise<RankedEntry | null>;
  readRange(index: string, offset: number, limit: number): Promise<RankedEntry[]>;
  countEntries(index: string, range?: { min?: number; max?: number }): Promise<number>;
  readRankHistory(index: string, userId: string, limit: number): Promise<RankHistoryRow[]>;
}

export interface WithRankIndexOptions {
  /**
   * Called when the rank index fails after the store committed. The call still succeeds (its writes are
   * durable in the store) with null ranks; the index catches up at the user's next write to that board.
   */
  onError?: (error: unknown) => void;
}

/**
 * A store whose ranks, pages, counts and rank history come from `rankIndex`. The store's commit stays the
 * single atomic write; the index is updated right after it with version-guarded absolute values, so
 * retries, races between processes and replays cannot leave it behind a newer value.
 */
export function withRankIndex(store: Store, rankIndex: RankIndex, options: WithRankIndexOptions = {}): Store {
  return {
    loadUser: (id) => store.loadUser(id),
    loadUsers: (ids) => store.loadUsers(ids),
    getIdempotencyRecord: (u, m, k) => store.getIdempotencyRecord(u, m, k),
    readLedger: (q) => store.readLedger(q),
    getCounters: (names) => store.getCounters(names),
    async commit(c) {
      const result = await store.commit(c);
      if (c.leaderboard.length === 0) return result;
      try {
        const ranks = await rankIndex.apply(c.leaderboard.map((w) => ({ ...w, version: result.version })));
        return { version: result.version, ranks };
      } catch (error) {
        options.onError?.(error);
        return { version: result.version, ranks: c.leaderboard.map((w) => ({ index: w.index, userId: w.userId, previousRank: null, rank: null, previousValue: null, value: w.remove ? null : w.value })) };
      }
    },
    getEntry: (index, userId) => rankIndex.getEntry(index, userId),
    readRange: (index, offset, limit) => rankIndex.readRange(index, offset, limit),
    countEntries: (index, range) => rankIndex.countEntries(index, range),
    readRankHistory: (index, userId, limit) => rankIndex.readRankHistory(index, userId, limit),
  };
}

/** A store that can list an index's entries with the committed version of each user (the Postgres store can). */
export interface RankIndexSource {
  scanEntries(index: string, offset: number, limit: number): Promise<(RankedEntry & { version: number })[]>;
}

/**
 * Rebuilds one index of a rank index from the store's authoritative entries, e.g. after Redis lost its data
 * or missed writes while it was down. Writes carry each user's committed version, so anything newer that
 * reached the index meanwhile is kept. Rank history is not rewritten. Returns the number of entries copied.
 * Cost: O(n) in the index's size: a maintenance operation, not a per-request one.
 */
export async function rebuildRankIndex(source: RankIndexSource, rankIndex: RankIndex, index: string, options: { batch?: number } = {}): Promise<number> {
  const batch = options.batch ?? 1000;
  let copied = 0;
  for (let offset = 0; ; offset += batch) {
    const page = await source.scanEntries(index, offset, batch);
    if (page.length === 0) break;
    await rankIndex.apply(page.map((e) => ({ index, userId: e.userId, value: e.value, reachedAt: e.reachedAt, date: e.reachedAt.slice(0, 10), version: e.version, unranked: true })));
    copied += page.length;
    if (page.length < batch) break;
  }
  return copied;
}
