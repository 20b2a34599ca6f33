/**
 * The store conformance suite: what every {@link Store} must do, as checks that throw on failure.
 * `describeStoreConformance` runs them under vitest; `runStoreConformance` runs them anywhere and reports.
 */
import { isLaurelErrorCode } from '../errors.js';
import type { LedgerRow, UserState } from '../core/types.js';
import type { Commit, Store } from '../store/types.js';

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
