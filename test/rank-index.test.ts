/**
 * `withRankIndex` on its own (no servers): which optional Store methods it offers, and how `commitBatch`
 * joins one store batch with one rank-index call. test/redis.batch.test.ts runs the same against Redis.
 */
import { describe, expect, it } from 'vitest';
import { ConflictError, isLaurelErrorCode, StorageUnavailableError } from '../src/errors.js';
import { createMemoryStore } from '../src/memory.js';
import { createEngine, defineConfig, withRankIndex, type RankIndex, type VersionedWrite } from '../src/index.js';
import { sampleState } from '../src/testing/index.js';
import type { BatchCommitOutcome, Commit, CommitResult, EventLoad, Store } from '../src/store/types.js';
import type { LeaderboardWrite } from '../src/core/types.js';

/** The store's methods without the optional ones. */
function plain(store: Store): Store {
  const { loadForEvents: _l, commitBatch: _c, ...rest } = store;
  return rest;
}

/** A commitBatch for a store without one: its commits one after another, as the contract defines a batch. */
function sequentialBatch(store: Store): Store & { batches: BatchCommitOutcome[][] } {
  const batches: BatchCommitOutcome[][] = [];
  return {
    ...plain(store),
    batches,
    async commitBatch(commits) {
      const out: BatchCommitOutcome[] = [];
      for (const c of commits) {
        try {
          out.push(await store.commit(c));
        } catch (error) {
          if (!isLaurelErrorCode(error, 'CONFLICT')) throw error;
          out.push(error as ConflictError);
        }
      }
      batches.push(out);
      return out;
    },
  };
}

/** A rank index that records its calls and answers rank = 1, 2, 3 ... over all its writes. */
function recordingIndex() {
  const calls: VersionedWrite[][] = [];
  let next = 0;
  let failure: unknown = null;
  const index: RankIndex = {
    async apply(writes) {
      calls.push(writes.map((w) => ({ ...w })));
      if (failure) throw failure;
      return writes.map((w) => ({
        index: w.index,
        userId: w.userId,
        previousRank: null,
        rank: ++next,
        previousValue: null,
        value: w.remove ? null : w.value,
        ...(w.thresholdRank ? { threshold: w.version * 100 } : {}),
      }));
    },
    getEntry: async () => null,
    readRange: async () => [],
    countEntries: async () => 0,
    readRankHistory: async () => [],
    scanUsers: async () => ({ cursor: '0', users: [] }),
    erase: async () => undefined,
  };
  return { index, calls, fail: (error: unknown) => (failure = error) };
}

const w = (index: string, userId: string, value: number, extra: Partial<LeaderboardWrite> = {}): LeaderboardWrite =>
  ({ index, userId, value, reachedAt: `2026-01-01T00:00:0${value % 10}.000Z`, date: '2026-01-01', ...extra }) as LeaderboardWrite;

function commitOf(userId: string, expectedVersion: number, leaderboard: LeaderboardWrite[]): Commit {
  return { userId, expectedVersion, state: sampleState(userId, String(expectedVersion + 1)), ledger: [], leaderboard, counters: {}, idempotency: null };
}

/** u1 three times (versions 1..3), u2 without board writes, u3 refused (it does not exist at version 5). */
const batch = (): Commit[] => [
  commitOf('u1', 0, [w('lb|a', 'u1', 3), w('pt|xp', 'u1', 3, { unranked: true })]),
  commitOf('u2', 0, []),
  commitOf('u1', 1, [w('lb|a', 'u1', 5)]),
  commitOf('u3', 5, [w('lb|a', 'u3', 9)]),
  commitOf('u1', 2, [w('lb|a', 'u1', 7, { thresholdRank: 10 }), { index: 'lb|b', userId: 'u1', remove: true, date: '2026-01-01' }]),
];

describe('withRankIndex: optional store methods', () => {
  it('offers loadForEvents and commitBatch exactly when the store has them, and forwards loadForEvents', async () => {
    const { index } = recordingIndex();
    const bare = withRankIndex(plain(createMemoryStore()), index);
    expect('loadForEvents' in bare).toBe(false);
    expect('commitBatch' in bare).toBe(false);

    const answer: EventLoad = { users: [null], records: [null, null] };
    const asked: unknown[] = [];
    const store: Store = {
      ...plain(createMemoryStore()),
      async loadForEvents(userIds, lookups) {
        asked.push([userIds, lookups]);
        return answer;
      },
    };
    const wrapped = withRankIndex(store, index);
    expect('commitBatch' in wrapped).toBe(false);
    const lookups = [
      { userId: 'u', metricKey: 'm', key: 'k1' },
      { userId: 'u', metricKey: 'm', key: 'k2' },
    ];
    expect(await wrapped.loadForEvents?.(['u'], lookups)).toBe(answer);
    expect(asked).toEqual([[['u'], lookups]]);
    expect(typeof withRankIndex(sequentialBatch(createMemoryStore()), index).commitBatch).toBe('function');
  });
});

describe('withRankIndex: commitBatch', () => {
  it('is one store batch and one rank-index call, each write tagged with its own commit version, ranks mapped back per commit', async () => {
    const store = sequentialBatch(createMemoryStore());
    const { index, calls } = recordingIndex();
    const wrapped = withRankIndex(store, index);
    const commits = batch();
    const out = await wrapped.commitBatch?.(commits);
    expect(store.batches).toHaveLength(1);
    const [fromStore] = store.batches as [BatchCommitOutcome[]];
    expect(calls).toHaveLength(1);
    expect(calls[0]?.map((x) => [x.index, x.userId, x.version, x.remove === true, x.thresholdRank])).toEqual([
      ['lb|a', 'u1', 1, false, undefined],
      ['pt|xp', 'u1', 1, false, undefined],
      ['lb|a', 'u1', 2, false, undefined],
      ['lb|a', 'u1', 3, false, 10],
      ['lb|b', 'u1', 3, true, undefined],
    ]);
    expect(calls[0]?.[1]?.unranked).toBe(true);
    expect(out).toHaveLength(5);
    // The refused commit keeps its ConflictError, the very object the store returned; a commit without
    // board writes keeps the store's result.
    expect(out?.[3]).toBe(fromStore[3]);
    expect(out?.[3]).toBeInstanceOf(ConflictError);
    expect(out?.[1]).toBe(fromStore[1]);
    expect(out?.[0]).toEqual({
      version: 1,
      ranks: [
        { index: 'lb|a', userId: 'u1', previousRank: null, rank: 1, previousValue: null, value: 3 },
        { index: 'pt|xp', userId: 'u1', previousRank: null, rank: 2, previousValue: null, value: 3 },
      ],
    });
    expect(out?.[2]).toEqual({ version: 2, ranks: [{ index: 'lb|a', userId: 'u1', previousRank: null, rank: 3, previousValue: null, value: 5 }] });
    expect(out?.[4]).toEqual({
      version: 3,
      ranks: [
        { index: 'lb|a', userId: 'u1', previousRank: null, rank: 4, previousValue: null, value: 7, threshold: 300 },
        { index: 'lb|b', userId: 'u1', previousRank: null, rank: 5, previousValue: null, value: null },
      ],
    });
    expect((await store.loadUser('u1'))?.version).toBe(3);
  });

  it('makes no rank-index call when no committed commit writes a board', async () => {
    const { index, calls } = recordingIndex();
    const wrapped = withRankIndex(sequentialBatch(createMemoryStore()), index);
    const out = await wrapped.commitBatch?.([commitOf('a', 0, []), commitOf('b', 3, [w('lb|a', 'b', 1)])]);
    expect(calls).toHaveLength(0);
    expect(out?.[0]).toMatchObject({ version: 1 });
    expect(out?.[1]).toBeInstanceOf(ConflictError);
    expect(await wrapped.commitBatch?.([])).toEqual([]);
    expect(calls).toHaveLength(0);
  });

  it('when the rank index fails after the durable batch: null ranks, ranksUnavailable, onError once, refused commits untouched', async () => {
    const store = sequentialBatch(createMemoryStore());
    const { index, calls, fail } = recordingIndex();
    const down = new StorageUnavailableError('Redis rank index: apply timed out after 1000 ms');
    fail(down);
    const errors: unknown[] = [];
    const wrapped = withRankIndex(store, index, {
      onError: (e) => {
        errors.push(e);
        throw new Error('an observer that throws changes nothing');
      },
    });
    const commits = batch();
    const out = (await wrapped.commitBatch?.(commits)) as BatchCommitOutcome[];
    const [fromStore] = store.batches as [BatchCommitOutcome[]];
    expect(calls).toHaveLength(1);
    expect(errors).toEqual([down]);
    expect(out[3]).toBe(fromStore[3]);
    expect(out[1]).toBe(fromStore[1]);
    const nulls = (c: Commit) => c.leaderboard.map((x) => ({ index: x.index, userId: x.userId, previousRank: null, rank: null, previousValue: null, value: x.remove ? null : x.value }));
    expect(out[0]).toEqual({ version: 1, ranks: nulls(commits[0] as Commit), ranksUnavailable: true });
    expect(out[2]).toEqual({ version: 2, ranks: nulls(commits[2] as Commit), ranksUnavailable: true });
    expect(out[4]).toEqual({ version: 3, ranks: nulls(commits[4] as Commit), ranksUnavailable: true });
    // The same degraded result as commit gives one commit at a time.
    const single = withRankIndex(createMemoryStore(), index);
    expect(await single.commit(commits[0] as Commit)).toEqual(out[0] as CommitResult);
    // The commits are durable all the same.
    expect((await store.loadUser('u1'))?.version).toBe(3);
  });

  it('rejects, without a rank-index call, when the store batch itself fails', async () => {
    const { index, calls } = recordingIndex();
    const boom = new StorageUnavailableError('PostgreSQL store: commitBatch failed');
    const store: Store = {
      ...plain(createMemoryStore()),
      commitBatch: () => Promise.reject(boom),
    };
    await expect(withRankIndex(store, index).commitBatch?.(batch())).rejects.toBe(boom);
    expect(calls).toHaveLength(0);
  });
});

describe('an event response\'s ranks and thresholds read from a rank index after the commit', () => {
  const config = defineConfig({
    metrics: [{ key: 'm', name: 'M' }],
    leaderboards: [
      { key: 'a', name: 'A', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', maxParticipants: 1 },
      { key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'month', maxParticipants: 5 },
      { key: 'c', name: 'C', rankBy: 'metric', metricKey: 'm', start: '2026-01-01', runUnit: 'year' },
    ],
  });
  for (const failAt of [0, 1, 2, 99]) {
    it(`are read one board after another; a read that fails (read ${failAt}) nulls that board and every later one, once`, async () => {
      const reads: string[] = [];
      const degraded: unknown[] = [];
      // A rank index that ranks each write by its place in the call and reports no threshold: the engine reads it.
      const index = {
        apply: async (ws: { index: string; userId: string; value?: number }[]) => ws.map((w, i) => ({ index: w.index, userId: w.userId, previousRank: null, rank: i + 1, previousValue: null, value: w.value ?? null })),
        readRange: async (ix: string) => {
          reads.push(ix);
          if (reads.length - 1 === failAt) throw new StorageUnavailableError('down');
          return [{ userId: 'x', value: 42, reachedAt: '2026-01-01T00:00:00.000Z', rank: 1 }];
        },
        getEntry: async () => null,
        countEntries: async () => 0,
        readRankHistory: async () => [],
        scanUsers: async () => [],
        erase: async () => undefined,
      } as unknown as RankIndex;
      const engine = createEngine({ config, store: withRankIndex(createMemoryStore(), index), clock: () => new Date('2026-03-05T00:00:00Z'), onDegraded: (e) => degraded.push(e) });
      const res = await engine.recordEvent('m', { user: { id: 'u' }, value: 1 });
      const got = Object.entries(res.leaderboards).map(([k, b]) => [k, b.rank, b.threshold]);
      const ok = Math.min(failAt, 3);
      expect(reads).toHaveLength(Math.min(failAt + 1, 3));
      expect(got).toEqual(['a', 'b', 'c'].map((k, i) => [k, i < ok ? i + 1 : null, i < ok ? 42 : 0]));
      expect(degraded).toHaveLength(failAt < 3 ? 1 : 0);
    });
  }
});
