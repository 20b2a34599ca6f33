/**
 * The store conformance suite: what every {@link Store} must do, as checks that throw on failure.
 * `describeStoreConformance` runs them under vitest; `runStoreConformance` runs them anywhere and reports.
 */
import { isLaurelErrorCode } from '../errors.js';
import type { IdempotencyRecord, LeaderboardWrite, LedgerRow, UserState } from '../core/types.js';
import type { BatchCommitOutcome, Commit, CommitResult, IdempotencyLookup, Store } from '../store/types.js';

export type StoreFactory = () => Store | Promise<Store>;

export interface ConformanceCheck {
  name: string;
  run: (store: Store) => Promise<void>;
}

class CheckFailed extends Error {}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new CheckFailed(message);
}

function equal(actual: unknown, expected: unknown, message: string): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new CheckFailed(`${message}\n  expected: ${e}\n  actual:   ${a}`);
}

/** JSON with object keys sorted: stores such as PostgreSQL's jsonb keep values, not key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]])) : v,
  );
}

async function rejectsWithConflict(p: Promise<unknown>, message: string): Promise<void> {
  try {
    await p;
  } catch (error) {
    assert(isLaurelErrorCode(error, 'CONFLICT'), `${message}: expected a ConflictError, got ${String(error)}`);
    return;
  }
  throw new CheckFailed(`${message}: expected a ConflictError, the commit succeeded`);
}

/** A minimal valid user state for store tests (`total` as given: states before 0.2 held decimal strings). */
export function sampleState(userId: string, total: number | string = 0): UserState {
  return {
    user: { id: userId, email: null, name: `User ${userId}`, tz: null, attributes: {}, created: '2026-01-01T00:00:00.000Z', updated: '2026-01-01T00:00:00.000Z' },
    metrics: { lessons: total as number },
    achievementProgress: {},
    achievements: {},
    streak: null,
    points: {},
    leaderboards: {},
  };
}

function metricRow(userId: string, id: string, at: string, delta: number, total: number, key = 'lessons'): LedgerRow {
  return { id, userId, kind: 'metric', key, at, delta, total, data: { eventId: id } };
}

function commitOf(userId: string, expectedVersion: number, extra: Partial<Commit> = {}): Commit {
  return { userId, expectedVersion, state: sampleState(userId, expectedVersion + 1), ledger: [], leaderboard: [], counters: {}, idempotency: null, ...extra };
}

const write = (index: string, userId: string, value: number, reachedAt: string, date = reachedAt.slice(0, 10)) => ({ index, userId, value, reachedAt, date });

const record = (userId: string, key: string, eventId: string, metricKey = 'lessons'): IdempotencyRecord => ({ userId, metricKey, key, eventId, at: '2026-01-01T00:00:00.000Z' });

const isConflict = (outcome: BatchCommitOutcome | undefined) => isLaurelErrorCode(outcome, 'CONFLICT');

/** A batch's outcomes as `ok` / `conflict`, and the results of the applied ones. */
function outcomesOf(outcomes: readonly BatchCommitOutcome[]): { kinds: string[]; results: CommitResult[] } {
  const kinds: string[] = [];
  const results: CommitResult[] = [];
  for (const o of outcomes) {
    if (isConflict(o)) kinds.push('conflict');
    else if (o instanceof Error) kinds.push(`error: ${String(o)}`);
    else {
      kinds.push('ok');
      results.push(o as CommitResult);
    }
  }
  return { kinds, results };
}

/** The same commit with its user ids prefixed and its indexes renamed (ties keep their order). */
function renamed(c: Commit, prefix: string): Commit {
  const user = (id: string) => prefix + id;
  return {
    ...c,
    userId: user(c.userId),
    state: sampleState(user(c.userId), c.expectedVersion + 1),
    ledger: c.ledger.map((r) => ({ ...r, userId: user(r.userId), id: prefix + r.id })),
    leaderboard: c.leaderboard.map((w): LeaderboardWrite => ({ ...w, index: prefix + w.index, userId: user(w.userId) })),
    idempotency: c.idempotency ? { ...c.idempotency, userId: user(c.idempotency.userId) } : null,
  };
}

/** Every check of the suite, in order. */
export const storeConformanceChecks: readonly ConformanceCheck[] = [
  {
    name: 'loadUser returns null for an unknown user',
    async run(store) {
      equal(await store.loadUser('nobody'), null, 'unknown user');
      equal(await store.loadUsers(['nobody', 'nobody2']), [null, null], 'unknown users');
    },
  },
  {
    name: 'a first commit creates the user at version 1; the store keeps no caller object but the state',
    async run(store) {
      const row = metricRow('u1', 'e1', '2026-01-01T00:00:00.000Z', 1, 1);
      const record = { userId: 'u1', metricKey: 'lessons', key: 'k1', eventId: 'e1', at: '2026-01-01T00:00:00.000Z' };
      const w = write('lb|copy', 'u1', 1, '2026-01-01T00:00:00.000Z');
      const c = commitOf('u1', 0, { ledger: [row], idempotency: record, leaderboard: [w], counters: { users: 1 } });
      const sent = JSON.stringify(c);
      const result = await store.commit(c);
      equal(result.version, 1, 'version after first commit');
      equal(JSON.stringify(c), sent, 'the commit passed in is not mutated');
      // States are immutable values a store MAY keep; the rows, writes and records MUST NOT be kept by reference.
      row.delta = 99;
      (row.data as { eventId: string }).eventId = 'mutated';
      record.eventId = 'mutated';
      w.value = 99;
      c.counters.users = 99;
      const loaded = await store.loadUser('u1');
      assert(loaded, 'user stored');
      equal(loaded.version, 1, 'loaded version');
      equal(canonical(loaded.state), canonical(sampleState('u1', 1)), 'stored state');
      equal(await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' }), [metricRow('u1', 'e1', '2026-01-01T00:00:00.000Z', 1, 1)], 'ledger row kept by value');
      equal((await store.getIdempotencyRecord('u1', 'lessons', 'k1'))?.eventId, 'e1', 'idempotency record kept by value');
      equal((await store.getEntry('lb|copy', 'u1'))?.value, 1, 'leaderboard write kept by value');
      equal(await store.getCounters(['users']), { users: 1 }, 'counters kept by value');
      const many = await store.loadUsers(['u1', 'missing']);
      equal([many[0]?.version, many[1]], [1, null], 'loadUsers');
    },
  },
  {
    name: 'versions grow by one per commit',
    async run(store) {
      await store.commit(commitOf('u1', 0));
      equal((await store.commit(commitOf('u1', 1))).version, 2, 'second commit');
      equal((await store.commit(commitOf('u1', 2))).version, 3, 'third commit');
      equal((await store.loadUser('u1'))?.version, 3, 'loaded version');
    },
  },
  {
    name: 'a stale version fails with a conflict and changes nothing',
    async run(store) {
      await store.commit(commitOf('u1', 0, { ledger: [metricRow('u1', 'e1', '2026-01-01T00:00:00.000Z', 1, 1)], counters: { users: 1 } }));
      await store.commit(commitOf('u1', 1));
      await rejectsWithConflict(
        store.commit(
          commitOf('u1', 1, {
            ledger: [metricRow('u1', 'e2', '2026-01-02T00:00:00.000Z', 5, 6)],
            leaderboard: [write('lb|x', 'u1', 5, '2026-01-02T00:00:00.000Z')],
            counters: { users: 1 },
            idempotency: { userId: 'u1', metricKey: 'lessons', key: 'k-stale', eventId: 'e2', at: '2026-01-02T00:00:00.000Z' },
          }),
        ),
        'stale commit',
      );
      equal((await store.loadUser('u1'))?.version, 2, 'version unchanged');
      equal((await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id), ['e1'], 'no ledger row added');
      equal(await store.getEntry('lb|x', 'u1'), null, 'no leaderboard entry added');
      equal(await store.getIdempotencyRecord('u1', 'lessons', 'k-stale'), null, 'no idempotency record added');
      equal(await store.getCounters(['users']), { users: 1 }, 'counters unchanged');
    },
  },
  {
    name: 'creating an existing user (expectedVersion 0) is a conflict',
    async run(store) {
      await store.commit(commitOf('u1', 0));
      await rejectsWithConflict(store.commit(commitOf('u1', 0)), 'second create');
    },
  },
  {
    name: 'racing commits on one version: exactly one wins',
    async run(store) {
      await store.commit(commitOf('race', 0));
      const n = 16;
      const results = await Promise.allSettled(
        Array.from({ length: n }, (_, i) =>
          store.commit(commitOf('race', 1, { ledger: [metricRow('race', `r${i}`, '2026-01-03T00:00:00.000Z', 1, 2)], counters: { races: 1 } })),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      equal(won.length, 1, 'winners');
      for (const r of results) if (r.status === 'rejected') assert(isLaurelErrorCode(r.reason, 'CONFLICT'), `losers fail with ConflictError, got ${String(r.reason)}`);
      equal((await store.readLedger({ userId: 'race', kind: 'metric', key: 'lessons', order: 'asc' })).length, 1, 'only the winner wrote its row');
      equal(await store.getCounters(['races']), { races: 1 }, 'only the winner counted');
      equal((await store.loadUser('race'))?.version, 2, 'version');
    },
  },
  {
    name: 'racing creates of one user: exactly one wins',
    async run(store) {
      const results = await Promise.allSettled(Array.from({ length: 8 }, () => store.commit(commitOf('new', 0, { counters: { users: 1 } }))));
      equal(results.filter((r) => r.status === 'fulfilled').length, 1, 'winners');
      equal(await store.getCounters(['users']), { users: 1 }, 'users counted once');
    },
  },
  {
    name: 'idempotency records are stored, read back and unique',
    async run(store) {
      const rec = { userId: 'u1', metricKey: 'lessons', key: 'k1', eventId: 'e1', at: '2026-01-01T00:00:00.000Z' };
      await store.commit(commitOf('u1', 0, { idempotency: rec }));
      equal(await store.getIdempotencyRecord('u1', 'lessons', 'k1'), rec, 'record read back');
      equal(await store.getIdempotencyRecord('u1', 'other', 'k1'), null, 'scoped by metric');
      equal(await store.getIdempotencyRecord('u2', 'lessons', 'k1'), null, 'scoped by user');
      await rejectsWithConflict(store.commit(commitOf('u1', 1, { idempotency: { ...rec, eventId: 'e2' } })), 'reused key');
      equal((await store.loadUser('u1'))?.version, 1, 'nothing applied');
      equal((await store.getIdempotencyRecord('u1', 'lessons', 'k1'))?.eventId, 'e1', 'first record kept');
    },
  },
  {
    name: 'ledger range reads: bounds, order, limit, isolation',
    async run(store) {
      const rows = [1, 2, 3, 4, 5].map((d) => metricRow('u1', `e${d}`, `2026-01-0${d}T12:00:00.000Z`, d, d));
      await store.commit(commitOf('u1', 0, { ledger: rows.slice(0, 3) }));
      await store.commit(commitOf('u1', 1, { ledger: [...rows.slice(3), metricRow('u1', 'x1', '2026-01-02T12:00:00.000Z', 9, 9, 'other'), metricRow('u2', 'y1', '2026-01-02T12:00:00.000Z', 9, 9)] }));
      const ids = async (q: Partial<Parameters<Store['readLedger']>[0]>) =>
        (await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc', ...q })).map((r) => r.id);
      equal(await ids({}), ['e1', 'e2', 'e3', 'e4', 'e5'], 'all rows ascending');
      equal(await ids({ order: 'desc' }), ['e5', 'e4', 'e3', 'e2', 'e1'], 'descending');
      equal(await ids({ from: '2026-01-02T12:00:00.000Z', to: '2026-01-04T12:00:00.000Z' }), ['e2', 'e3'], 'from inclusive, to exclusive');
      equal(await ids({ order: 'desc', limit: 2 }), ['e5', 'e4'], 'latest two');
      equal(await ids({ to: '2026-01-03T00:00:00.000Z', order: 'desc', limit: 1 }), ['e2'], 'last row before an instant');
      equal(await ids({ from: '2026-02-01T00:00:00.000Z' }), [], 'empty range');
      const full = await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc', limit: 1 });
      equal(full[0], rows[0], 'rows read back whole');
    },
  },
  {
    name: 'leaderboard order: value desc, then earlier reachedAt, then user id',
    async run(store) {
      const t1 = '2026-01-01T10:00:00.000Z';
      const t2 = '2026-01-01T11:00:00.000Z';
      const users = [
        ['a', 5, t2],
        ['b', 7, t2],
        ['c', 5, t1],
        ['d', 5, t2],
        ['e', 1, t1],
      ] as const;
      let v = 0;
      for (const [id, value, at] of users) {
        await store.commit(commitOf(id, 0, { leaderboard: [write('lb|order', id, value, at)] }));
        v++;
      }
      equal((await store.readRange('lb|order', 0, 10)).map((e) => [e.userId, e.rank]), [['b', 1], ['c', 2], ['a', 3], ['d', 4], ['e', 5]], 'ranking');
      equal((await store.readRange('lb|order', 2, 2)).map((e) => [e.userId, e.rank]), [['a', 3], ['d', 4]], 'offset page');
      equal((await store.readRange('lb|order', 10, 2)).length, 0, 'page past the end');
      equal((await store.getEntry('lb|order', 'd'))?.rank, 4, 'entry rank');
      equal(await store.countEntries('lb|order'), 5, 'count');
      equal(await store.countEntries('lb|order', { min: 5 }), 4, 'count value >= 5');
      equal(await store.countEntries('lb|order', { min: 2, max: 6 }), 3, 'count 2 <= value < 6');
      equal(await store.countEntries('lb|missing'), 0, 'unknown index');
      assert(v === 5, 'all written');
    },
  },
  {
    name: 'leaderboard writes are absolute: set, re-set harmlessly, remove; ranks before and after',
    async run(store) {
      const at = '2026-01-01T10:00:00.000Z';
      await store.commit(commitOf('x', 0, { leaderboard: [write('lb|abs', 'x', 10, at)] }));
      const r1 = await store.commit(commitOf('y', 0, { leaderboard: [write('lb|abs', 'y', 5, at)] }));
      equal(r1.ranks, [{ index: 'lb|abs', userId: 'y', previousRank: null, rank: 2, previousValue: null, value: 5 }], 'new entry');
      const r2 = await store.commit(commitOf('y', 1, { leaderboard: [write('lb|abs', 'y', 20, '2026-01-01T11:00:00.000Z')] }));
      equal(r2.ranks, [{ index: 'lb|abs', userId: 'y', previousRank: 2, rank: 1, previousValue: 5, value: 20 }], 'moved up');
      const r3 = await store.commit(commitOf('y', 2, { leaderboard: [write('lb|abs', 'y', 20, '2026-01-01T11:00:00.000Z')] }));
      equal(r3.ranks[0]?.rank, 1, 're-applied write keeps the rank');
      equal(await store.countEntries('lb|abs'), 2, 're-applied write adds nothing');
      const r4 = await store.commit(commitOf('y', 3, { leaderboard: [{ index: 'lb|abs', userId: 'y', remove: true, date: '2026-01-01' }] }));
      equal(r4.ranks, [{ index: 'lb|abs', userId: 'y', previousRank: 1, rank: null, previousValue: 20, value: null }], 'removed');
      equal(await store.getEntry('lb|abs', 'y'), null, 'entry gone');
      equal((await store.getEntry('lb|abs', 'x'))?.rank, 1, 'other entry moved up');
    },
  },
  {
    name: 'rank history keeps one row per (index, user, date)',
    async run(store) {
      await store.commit(commitOf('h', 0, { leaderboard: [write('lb|h', 'h', 1, '2026-01-01T10:00:00.000Z')] }));
      await store.commit(commitOf('h', 1, { leaderboard: [write('lb|h', 'h', 2, '2026-01-01T11:00:00.000Z')] }));
      await store.commit(commitOf('h', 2, { leaderboard: [write('lb|h', 'h', 3, '2026-01-02T11:00:00.000Z')] }));
      equal(
        await store.readRankHistory('lb|h', 'h', 10),
        [
          { date: '2026-01-02', previousRank: 1, rank: 1, previousValue: 2, value: 3 },
          { date: '2026-01-01', previousRank: null, rank: 1, previousValue: null, value: 2 },
        ],
        'history newest first',
      );
      equal((await store.readRankHistory('lb|h', 'h', 1)).length, 1, 'limit');
    },
  },
  {
    name: 'counters add up across commits',
    async run(store) {
      await store.commit(commitOf('c1', 0, { counters: { users: 1, 'achievement:a': 1 } }));
      await store.commit(commitOf('c2', 0, { counters: { users: 1 } }));
      equal(await store.getCounters(['users', 'achievement:a', 'unknown']), { users: 2, 'achievement:a': 1, unknown: 0 }, 'counters');
    },
  },
  {
    name: 'loadForEvents (optional) reads what loadUsers and getIdempotencyRecord read',
    async run(store) {
      if (!store.loadForEvents) return;
      await store.commit(commitOf('u1', 0, { idempotency: record('u1', 'k1', 'e1') }));
      await store.commit(commitOf('u1', 1, { idempotency: record('u1', 'k2', 'e2') }));
      await store.commit(commitOf('u2', 0, { idempotency: record('u2', 'k1', 'e3', 'other') }));
      const userIds = ['u1', 'missing', 'u2', 'u1'];
      const lookups: IdempotencyLookup[] = [
        { userId: 'u1', metricKey: 'lessons', key: 'k1' },
        { userId: 'u1', metricKey: 'lessons', key: 'nope' },
        { userId: 'u2', metricKey: 'other', key: 'k1' },
        { userId: 'u2', metricKey: 'lessons', key: 'k1' },
        { userId: 'missing', metricKey: 'lessons', key: 'k1' },
        { userId: 'u1', metricKey: 'lessons', key: 'k2' },
      ];
      const separate = async (ids: string[], ls: IdempotencyLookup[]) => ({
        users: await store.loadUsers(ids),
        records: await Promise.all(ls.map((l) => store.getIdempotencyRecord(l.userId, l.metricKey, l.key))),
      });
      const together = await store.loadForEvents(userIds, lookups);
      equal(canonical(together), canonical(await separate(userIds, lookups)), 'states and records');
      equal(together.users.map((u) => u?.version ?? null), [2, null, 1, 2], 'versions in the order asked');
      equal(together.records.map((r) => r?.eventId ?? null), ['e1', null, 'e3', null, null, 'e2'], 'records in the order asked');
      equal(await store.loadForEvents([], []), { users: [], records: [] }, 'nothing asked');
      equal(canonical(await store.loadForEvents(['u2'], [])), canonical(await separate(['u2'], [])), 'users only');
      equal(canonical(await store.loadForEvents([], lookups.slice(0, 1))), canonical(await separate([], lookups.slice(0, 1))), 'records only');
    },
  },
  {
    name: 'commitBatch (optional) applies commits of several users in order, each with the ranks that commits one by one give',
    async run(store) {
      if (!store.commitBatch) return;
      const at = (h: string) => `2026-01-01T${h}:00:00.000Z`;
      const commits = [
        commitOf('a', 0, { ledger: [metricRow('a', 'a1', at('10'), 1, 1)], leaderboard: [write('lb|b', 'a', 5, at('10'))], counters: { users: 1 }, idempotency: record('a', 'ka', 'a1') }),
        commitOf('b', 0, { leaderboard: [write('lb|b', 'b', 7, at('10'))], counters: { users: 1 } }),
        commitOf('a', 1, { ledger: [metricRow('a', 'a2', at('11'), 2, 3)], leaderboard: [write('lb|b', 'a', 9, at('11'))] }),
        commitOf('c', 0, { leaderboard: [write('lb|b', 'c', 7, at('09'))], counters: { users: 1, 'achievement:x': 1 } }),
        commitOf('b', 1, { leaderboard: [{ index: 'lb|b', userId: 'b', remove: true, date: '2026-01-01' }, write('lb|b2', 'b', 1, at('12'))] }),
      ];
      const { kinds, results } = outcomesOf(await store.commitBatch(commits));
      equal(kinds, ['ok', 'ok', 'ok', 'ok', 'ok'], 'outcomes');
      equal(results.map((r) => r.version), [1, 1, 2, 1, 2], 'versions');
      const ranks = results.map((r) => r.ranks.map((x) => [x.index, x.userId, x.previousRank, x.rank, x.previousValue, x.value]));
      equal(
        ranks,
        [
          [['lb|b', 'a', null, 1, null, 5]],
          [['lb|b', 'b', null, 1, null, 7]],
          [['lb|b', 'a', 2, 1, 5, 9]],
          [['lb|b', 'c', null, 2, null, 7]],
          [
            ['lb|b', 'b', 3, null, 7, null],
            ['lb|b2', 'b', null, 1, null, 1],
          ],
        ],
        'ranks before and after each write, as committed one after another',
      );
      // The same commits one by one (other users and indexes of the same shape) give the same answers.
      const sequential: CommitResult[] = [];
      for (const c of commits) sequential.push(await store.commit(renamed(c, 's-')));
      const strip = (r: CommitResult) => ({ version: r.version, ranks: r.ranks.map((x) => ({ ...x, index: x.index.replace(/^s-/, ''), userId: x.userId.replace(/^s-/, '') })) });
      equal(sequential.map(strip), results.map(strip), 'commitBatch answers as commit does');
      equal((await store.loadUsers(['a', 'b', 'c'])).map((u) => u?.version), [2, 2, 1], 'stored versions');
      equal((await store.readLedger({ userId: 'a', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id), ['a1', 'a2'], 'ledger rows in order');
      equal((await store.readRange('lb|b', 0, 10)).map((e) => [e.userId, e.value, e.rank]), [['a', 9, 1], ['c', 7, 2]], 'index');
      equal(await store.readRankHistory('lb|b', 'a', 10), [{ date: '2026-01-01', previousRank: null, rank: 1, previousValue: null, value: 9 }], 'one history row per day');
      equal(await store.readRankHistory('lb|b', 'b', 10), [{ date: '2026-01-01', previousRank: null, rank: null, previousValue: null, value: null }], 'history of a removed entry');
      equal(await store.getCounters(['users', 'achievement:x']), { users: 6, 'achievement:x': 2 }, 'counters of both runs');
      equal((await store.getIdempotencyRecord('a', 'lessons', 'ka'))?.eventId, 'a1', 'idempotency record');
      equal(await store.commitBatch([]), [], 'an empty batch');
    },
  },
  {
    name: 'commitBatch (optional): a refused commit changes nothing and stops no other; the refused user\'s later commits are refused',
    async run(store) {
      if (!store.commitBatch) return;
      const at = '2026-01-02T10:00:00.000Z';
      await store.commit(commitOf('u', 0, { ledger: [metricRow('u', 'u1', at, 1, 1)], leaderboard: [write('lb|r', 'u', 3, at)], counters: { users: 1 } }));
      await store.commit(commitOf('u', 1));
      await store.commit(commitOf('v', 0, { counters: { users: 1 } }));
      const outcomes = await store.commitBatch([
        commitOf('x', 0, { leaderboard: [write('lb|r', 'x', 1, at)], counters: { users: 1 } }),
        // Stale: u is at version 2.
        commitOf('u', 1, { ledger: [metricRow('u', 'u-stale', at, 5, 6)], leaderboard: [write('lb|r', 'u', 100, at)], counters: { users: 1, stale: 1 }, idempotency: record('u', 'k-stale', 'u-stale') }),
        commitOf('y', 0, { leaderboard: [write('lb|r', 'y', 2, at)], counters: { users: 1 } }),
        // Its expected version matches what is stored, but it was computed from the refused commit.
        commitOf('u', 2, { ledger: [metricRow('u', 'u-late', at, 5, 6)], leaderboard: [write('lb|r', 'u', 50, at)], counters: { late: 1 }, idempotency: record('u', 'k-late', 'u-late') }),
        commitOf('x', 1, { leaderboard: [write('lb|r', 'x', 4, at)] }),
        // Creating a user that exists.
        commitOf('v', 0, { ledger: [metricRow('v', 'v-again', at, 1, 1)], counters: { users: 1 } }),
        commitOf('x', 2, { leaderboard: [write('lb|r', 'x', 5, at)] }),
      ]);
      const { kinds, results } = outcomesOf(outcomes);
      equal(kinds, ['ok', 'conflict', 'ok', 'conflict', 'ok', 'conflict', 'ok'], 'outcomes');
      equal(results.map((r) => r.version), [1, 1, 2, 3], 'versions of the applied commits');
      equal(
        results.map((r) => r.ranks.map((x) => [x.userId, x.previousRank, x.rank])),
        [[['x', null, 2]], [['y', null, 2]], [['x', 3, 1]], [['x', 1, 1]]],
        'ranks of the applied commits',
      );
      equal((await store.loadUsers(['u', 'v', 'x', 'y'])).map((s) => s?.version), [2, 1, 3, 1], 'stored versions');
      equal(canonical((await store.loadUser('u'))?.state), canonical(sampleState('u', 2)), 'the refused user\'s state unchanged');
      equal((await store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id), ['u1'], 'no rows of refused commits');
      equal((await store.readLedger({ userId: 'v', kind: 'metric', key: 'lessons', order: 'asc' })).length, 0, 'no rows of a refused create');
      equal((await store.getEntry('lb|r', 'u'))?.value, 3, 'no entry of refused commits');
      equal(await store.getIdempotencyRecord('u', 'lessons', 'k-stale'), null, 'no record of a refused commit');
      equal(await store.getIdempotencyRecord('u', 'lessons', 'k-late'), null, 'no record of a later refused commit');
      equal(await store.getCounters(['users', 'stale', 'late']), { users: 4, stale: 0, late: 0 }, 'counters of applied commits only');
      equal((await store.readRange('lb|r', 0, 10)).map((e) => [e.userId, e.value]), [['x', 5], ['u', 3], ['y', 2]], 'index');
    },
  },
  {
    name: 'commitBatch (optional): idempotency keys conflict with stored records and with earlier commits of the batch',
    async run(store) {
      if (!store.commitBatch) return;
      await store.commit(commitOf('u', 0, { idempotency: record('u', 'k1', 'e0') }));
      const { kinds, results } = outcomesOf(
        await store.commitBatch([
          commitOf('u', 1, { ledger: [metricRow('u', 'e1', '2026-01-03T00:00:00.000Z', 1, 1)], counters: { n: 1 }, idempotency: record('u', 'k1', 'e1') }),
          commitOf('w', 0, { counters: { n: 1 }, idempotency: record('w', 'k1', 'e2') }),
          commitOf('w', 1, { ledger: [metricRow('w', 'e3', '2026-01-03T00:00:00.000Z', 1, 1)], counters: { n: 1 }, idempotency: record('w', 'k1', 'e3') }),
          commitOf('z', 0, { counters: { n: 1 }, idempotency: record('z', 'k1', 'e4') }),
          commitOf('z', 1, { counters: { n: 1 }, idempotency: record('z', 'k1', 'e5', 'other') }),
        ]),
      );
      equal(kinds, ['conflict', 'ok', 'conflict', 'ok', 'ok'], 'outcomes');
      equal(results.map((r) => r.version), [1, 1, 2], 'versions');
      equal((await store.loadUsers(['u', 'w', 'z'])).map((s) => s?.version), [1, 1, 2], 'stored versions');
      equal((await store.getIdempotencyRecord('u', 'lessons', 'k1'))?.eventId, 'e0', 'the stored record kept');
      equal((await store.getIdempotencyRecord('w', 'lessons', 'k1'))?.eventId, 'e2', 'the first use in the batch kept');
      equal((await store.getIdempotencyRecord('z', 'other', 'k1'))?.eventId, 'e5', 'keys are scoped by metric');
      equal((await store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc' })).length, 0, 'no rows of the refused commit');
      equal((await store.readLedger({ userId: 'w', kind: 'metric', key: 'lessons', order: 'asc' })).length, 0, 'no rows of the refused commit in the batch');
      equal(await store.getCounters(['n']), { n: 3 }, 'counters of applied commits only');
    },
  },
  {
    name: 'thresholds (optional): a write with thresholdRank reports the value at that rank after it, 0 when there is none',
    async run(store) {
      const at = (m: string) => `2026-01-04T10:${m}:00.000Z`;
      for (const [id, value] of [['a', 10], ['b', 8], ['c', 6]] as const) await store.commit(commitOf(id, 0, { leaderboard: [write('lb|t', id, value, at('00'))] }));
      const first = await store.commit(commitOf('d', 0, { leaderboard: [{ ...write('lb|t', 'd', 9, at('01')), thresholdRank: 2 }] }));
      // A store MAY leave thresholds out (the engine then reads them); when it reports one, it must be right.
      if (first.ranks[0]?.threshold === undefined) return;
      const thresholds = (r: CommitResult) => r.ranks.map((x) => x.threshold);
      equal(thresholds(first), [9], 'rank 2 after the write is the written entry');
      equal(thresholds(await store.commit(commitOf('e', 0, { leaderboard: [{ ...write('lb|t', 'e', 7, at('02')), thresholdRank: 5 }] }))), [6], 'rank 5 of 5');
      equal(thresholds(await store.commit(commitOf('f', 0, { leaderboard: [{ ...write('lb|t', 'f', 1, at('03')), thresholdRank: 10 }] }))), [0], 'fewer entries than the rank');
      const two = await store.commit(
        commitOf('g', 0, {
          leaderboard: [
            { ...write('lb|t', 'g', 20, at('04')), thresholdRank: 1 },
            { ...write('lb|t2', 'g', 5, at('04')), thresholdRank: 1 },
            write('lb|t2', 'g', 6, at('05')),
          ],
        }),
      );
      equal(thresholds(two), [20, 5, undefined], 'per write, after that write; none when not asked');
      equal(thresholds(await store.commit(commitOf('a', 1, { leaderboard: [{ index: 'lb|t', userId: 'a', remove: true, date: '2026-01-04', thresholdRank: 2 }] }))), [9], 'after a removal');
      if (!store.commitBatch) return;
      const batch = outcomesOf(
        await store.commitBatch([
          commitOf('h', 0, { leaderboard: [{ ...write('lb|t3', 'h', 3, at('06')), thresholdRank: 1 }] }),
          commitOf('i', 0, { leaderboard: [{ ...write('lb|t3', 'i', 4, at('06')), thresholdRank: 2 }] }),
          commitOf('h', 0, { leaderboard: [{ ...write('lb|t3', 'h', 9, at('06')), thresholdRank: 1 }] }),
          commitOf('j', 0, { leaderboard: [{ ...write('lb|t3', 'j', 1, at('06')), thresholdRank: 3 }] }),
        ]),
      );
      equal(batch.kinds, ['ok', 'ok', 'conflict', 'ok'], 'batch outcomes');
      equal(batch.results.map(thresholds), [[3], [3], [1]], 'thresholds of each commit of a batch, after its write');
    },
  },
];

/** Runs every check against fresh stores and returns the failures (empty when the store conforms). */
export async function runStoreConformance(factory: StoreFactory): Promise<{ name: string; error: unknown }[]> {
  const failures: { name: string; error: unknown }[] = [];
  for (const check of storeConformanceChecks) {
    try {
      await check.run(await factory());
    } catch (error) {
      failures.push({ name: check.name, error });
    }
  }
  return failures;
}
