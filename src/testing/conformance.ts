/**
 * The store conformance suite: what every {@link Store} must do, as checks that throw on failure. It imports
 * no test framework: `runStoreConformance` runs it anywhere and reports; `registerStoreConformance` (and the
 * adapters `laurel/testing/vitest`, `laurel/testing/jest`, `laurel/testing/node`) register it as tests.
 */
import { isLaurelErrorCode, type LaurelErrorCode } from '../errors.js';
import type { ChangeEvent, IdempotencyRecord, LeaderboardWrite, LedgerRow, StoredChange } from '../core/types.js';
import type { BatchCommitOutcome, Commit, CommitResult, IdempotencyLookup, OutboxStore, Store } from '../store/types.js';
import { assert, CheckFailed, equal, sampleState } from './checks.js';
import { tenancyChecks } from './tenancy.js';

export { sampleState };

/**
 * The fault-injection hook a store under test calls: `point(label)` right before each statement (each
 * round trip, each write) of `commit`, `commitBatch` and `eraseUser`, `label` naming it (`'insert ledger'`).
 * An armed point throws an {@link InjectedFault}, standing for the server failing that statement; the store
 * lets it propagate (after rolling back) as it would a database error, and MUST then have changed nothing.
 * Unarmed, `point` does nothing and costs nothing. Production code passes no injector.
 */
export interface FaultInjector {
  /** Called right before a statement of a write; throws {@link InjectedFault} when the suite armed it. */
  point(label: string): void;
}

/** What {@link StoreFactory} receives: a fresh fault injector per check. */
export interface StoreFactoryContext {
  /** The check's {@link FaultInjector}: wire it into the store's write paths (see {@link FaultInjector}). */
  faults: FaultInjector;
}

/**
 * Makes a fresh, empty store for one check. It receives the check's {@link FaultInjector} (`faults`): a store
 * that calls `faults.point(label)` before each statement of `commit`, `commitBatch` and `eraseUser` gets the
 * atomicity checks, which arm the N-th point to throw for N = 1, 2, ... until a write passes every point,
 * and require each failed write to have changed nothing (state, version, ledger, entries and ranks, rank
 * history, counters, idempotency records, boosts). A store that calls no point (e.g. the memory store, whose
 * writes cannot fail half-way) gets those checks as "not applicable" (skipped), never as passed.
 *
 * @example
 * ```ts
 * const factory: StoreFactory = ({ faults }) => createMyStore({ database: freshDatabase(), onStatement: (label) => faults.point(label) });
 * ```
 */
export type StoreFactory = (context: StoreFactoryContext) => Store | Promise<Store>;

/** What a check receives besides its store. */
export interface ConformanceContext {
  /** The fault injector given to the factory, to arm and inspect. */
  faults: ConformanceFaults;
  /** Ends the check as not applicable to this store (reported as skipped, never as passed). */
  skip(reason: string): never;
}

/** One check of the suite: throws on failure, ends with {@link ConformanceContext.skip} when not applicable. */
export interface ConformanceCheck {
  /** What the check requires, as a sentence (the test's name). */
  name: string;
  /** Runs the check on a fresh, empty store; throws on failure. */
  run: (store: Store, context: ConformanceContext) => Promise<void>;
}

/** The outcome of one check (see {@link runConformanceCheck}). */
export type CheckOutcome = { status: 'passed' } | { status: 'skipped'; reason: string } | { status: 'failed'; error: unknown };

/** What {@link runStoreConformance} reports: the checks passed, failed and skipped (not applicable), in suite order. */
export interface ConformanceReport {
  passed: string[];
  failed: { name: string; error: unknown }[];
  skipped: { name: string; reason: string }[];
}

/** The error an armed fault point throws (see {@link FaultInjector}). */
export class InjectedFault extends Error {
  constructor(
    /** The label of the point. */
    readonly label: string,
    /** The point's number in the write (1 for the first). */
    readonly point: number,
  ) {
    super(`injected fault at point ${point} (${label})`);
    this.name = 'InjectedFault';
  }
}

/** Thrown by {@link ConformanceContext.skip}: the check does not apply to the store. */
export class CheckNotApplicable extends Error {
  constructor(readonly reason: string) {
    super(`not applicable: ${reason}`);
    this.name = 'CheckNotApplicable';
  }
}

/**
 * The suite's {@link FaultInjector}: counts the points a store calls and, armed with `arm(n)`, throws an
 * {@link InjectedFault} at the `n`-th point after arming (once).
 */
export class ConformanceFaults implements FaultInjector {
  /** Points called since the injector was made. */
  total = 0;
  /** Points called since the last `arm` (or since the start). */
  reached = 0;
  /** The fault thrown since the last `arm`, or null. */
  fired: InjectedFault | null = null;
  /** Labels of the points called since the last `arm`. */
  labels: string[] = [];
  private armedAt = 0;

  /** Throws at the `n`-th point from now (1: the next one). */
  arm(n: number): void {
    this.armedAt = n;
    this.reached = 0;
    this.fired = null;
    this.labels = [];
  }

  /** No point throws; the counts go on. */
  disarm(): void {
    this.armedAt = 0;
  }

  /** Counts the point; throws {@link InjectedFault} when it is the armed one. */
  point(label: string): void {
    this.total++;
    this.reached++;
    this.labels.push(label);
    if (this.armedAt > 0 && this.reached === this.armedAt) {
      this.armedAt = 0;
      throw (this.fired = new InjectedFault(label, this.reached));
    }
  }
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

async function rejectsWithCode(p: Promise<unknown>, code: LaurelErrorCode, message: string): Promise<void> {
  try {
    await p;
  } catch (error) {
    assert(isLaurelErrorCode(error, code), `${message}: expected a ${code} error, got ${String(error)}`);
    return;
  }
  throw new CheckFailed(`${message}: expected a ${code} error, the call succeeded`);
}

/** Every metric row of a user, newest first, `limit` at a time through `readEvents`; checks the pages and cursors. */
async function readAllEvents(store: Store, userId: string, limit: number, metricKey?: string): Promise<LedgerRow[]> {
  const rows: LedgerRow[] = [];
  let before: string | undefined;
  for (let pages = 0; ; pages++) {
    assert(pages <= 1000, `readEvents(${JSON.stringify(userId)}, limit ${limit}): no end after 1000 pages`);
    const page = await store.readEvents(userId, { ...(metricKey === undefined ? {} : { metricKey }), ...(before === undefined ? {} : { before }), limit });
    assert(page.rows.length <= limit, `readEvents: a page of limit ${limit} holds ${page.rows.length} rows`);
    rows.push(...page.rows);
    if (page.next === null) return rows;
    assert(typeof page.next === 'string', `readEvents: next must be a string or null, got ${String(page.next)}`);
    assert(page.rows.length === limit, `readEvents: a page of ${page.rows.length} rows (limit ${limit}) with more to come`);
    before = page.next;
  }
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

/** A row of any kind (data as given). */
function rowOf(userId: string, id: string, kind: LedgerRow['kind'], key: string, at: string, data: LedgerRow['data'] = null, delta = 1, total = 1): LedgerRow {
  return { id, userId, kind, key, at, delta, total, data };
}

/** Every row of a user's ledger, read `limit` rows at a time; checks the pages and their cursors on the way. */
async function readWholeLedger(store: Store, userId: string, limit: number): Promise<LedgerRow[]> {
  const rows: LedgerRow[] = [];
  let after: string | undefined;
  for (let pages = 0; ; pages++) {
    assert(pages <= 1000, `readUserLedger(${JSON.stringify(userId)}, limit ${limit}): no end after 1000 pages`);
    const page = await store.readUserLedger(userId, after === undefined ? { limit } : { after, limit });
    assert(page.rows.length <= limit, `readUserLedger: a page of limit ${limit} holds ${page.rows.length} rows`);
    rows.push(...page.rows);
    if (page.next === null) return rows;
    assert(typeof page.next === 'string', `readUserLedger: next must be a string or null, got ${String(page.next)}`);
    assert(page.rows.length > 0, `readUserLedger: an empty page of limit ${limit} with more to come`);
    after = page.next;
  }
}

/** The ids of the users of a store, `limit` at a time, each page after the last id of the one before, to an empty page. */
async function listAllUsers(store: Store, limit: number): Promise<string[]> {
  const ids: string[] = [];
  for (let pages = 0; ; pages++) {
    assert(pages <= 1000, `listUsers(limit ${limit}): no end after 1000 pages`);
    const page = await store.listUsers(ids.length === 0 ? { limit } : { after: ids[ids.length - 1] as string, limit });
    assert(page.length <= limit, `listUsers: a page of limit ${limit} holds ${page.length} ids`);
    if (page.length === 0) return ids;
    ids.push(...page);
  }
}

const codeUnitOrder = (ids: readonly string[]) => [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

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
    name: 'rank history: a write dated before the newest row updates or slots in at its own date (a user who moved west)',
    async run(store) {
      const at = (version: number, value: number, date: string) => store.commit(commitOf('w', version, { leaderboard: [write('lb|hw', 'w', value, `2026-01-06T0${version}:00:00.000Z`, date)] }));
      await at(0, 1, '2026-01-03');
      await at(1, 2, '2026-01-05');
      await at(2, 3, '2026-01-03');
      await at(3, 4, '2026-01-04');
      await at(4, 5, '2026-01-01');
      equal(
        (await store.readRankHistory('lb|hw', 'w', 10)).map((h) => [h.date, h.previousRank, h.rank, h.previousValue, h.value]),
        [
          ['2026-01-05', 1, 1, 1, 2],
          ['2026-01-04', 1, 1, 3, 4],
          ['2026-01-03', null, 1, null, 3],
          ['2026-01-01', 1, 1, 4, 5],
        ],
        'one row per date, newest date first',
      );
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
    async run(store, context) {
      if (!store.loadForEvents) return context.skip('the store has no loadForEvents (optional)');
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
    async run(store, context) {
      if (!store.commitBatch) return context.skip('the store has no commitBatch (optional)');
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
    async run(store, context) {
      if (!store.commitBatch) return context.skip('the store has no commitBatch (optional)');
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
    async run(store, context) {
      if (!store.commitBatch) return context.skip('the store has no commitBatch (optional)');
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
    async run(store, context) {
      const at = (m: string) => `2026-01-04T10:${m}:00.000Z`;
      for (const [id, value] of [['a', 10], ['b', 8], ['c', 6]] as const) await store.commit(commitOf(id, 0, { leaderboard: [write('lb|t', id, value, at('00'))] }));
      const first = await store.commit(commitOf('d', 0, { leaderboard: [{ ...write('lb|t', 'd', 9, at('01')), thresholdRank: 2 }] }));
      // A store MAY leave thresholds out (the engine then reads them); when it reports one, it must be right.
      if (first.ranks[0]?.threshold === undefined) return context.skip('the store reports no thresholds (optional: the engine reads them)');
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
  {
    name: 'readUserLedger: every kind and key in commit order (rows of a commit as listed, not by instant), other users and refused commits left out',
    async run(store) {
      const t = (d: string, h = '12') => `2026-02-${d}T${h}:00:00.000Z`;
      const c1 = [
        rowOf('r', 'm1', 'metric', 'lessons', t('10'), { eventId: 'm1' }),
        rowOf('r', 'p1', 'points', 'xp', t('10'), { trigger: 'xp.lessons', type: 'metric' }, 10, 10),
        rowOf('r', 'u1', 'user', 'user', t('10'), { user: { name: 'Ann' } }, 0, 0),
      ];
      // Earlier instants than the commit before, one row twice at the same instant, and a row dated back in a
      // key that already holds later rows.
      const c2 = [
        rowOf('r', 'q1', 'metric', 'quizzes', t('05'), null),
        rowOf('r', 'm2', 'metric', 'lessons', t('05'), null, 1, 2),
        rowOf('r', 'a1', 'achievement', 'first', t('05'), { completionId: 'a1' }, 0, 0),
        rowOf('r', 'm3', 'metric', 'lessons', t('05'), null, 1, 3),
        rowOf('r', 's1', 'streak', 'streak', t('04'), null, 1, 1),
      ];
      // Instants going back and forth within one commit and one key.
      const c3 = [
        rowOf('r', 'm4', 'metric', 'lessons', t('20'), null, 1, 4),
        rowOf('r', 'm5', 'metric', 'lessons', t('01'), null, 1, 5),
        rowOf('r', 'p2', 'points', 'xp', t('01'), null, 5, 15),
        rowOf('r', 'm6', 'metric', 'lessons', t('10', '00'), null, 1, 6),
        rowOf('r', 'm7', 'metric', 'lessons', t('10'), null, 1, 7),
      ];
      await store.commit(commitOf('r', 0, { ledger: c1 }));
      await store.commit(commitOf('o', 0, { ledger: [rowOf('o', 'o1', 'metric', 'lessons', t('07'))] }));
      await store.commit(commitOf('r', 1, { ledger: c2 }));
      await rejectsWithConflict(store.commit(commitOf('r', 1, { ledger: [rowOf('r', 'stale', 'metric', 'lessons', t('06'))] })), 'stale commit');
      await store.commit(commitOf('r', 2, { ledger: c3 }));
      await store.commit(commitOf('r', 3));
      await store.commit(commitOf('o', 1, { ledger: [rowOf('o', 'o2', 'points', 'xp', t('08'))] }));
      let expected = [...c1, ...c2, ...c3];
      if (store.commitBatch) {
        const c4 = [rowOf('r', 'm8', 'metric', 'lessons', t('02'), null, 1, 8), rowOf('r', 'p3', 'points', 'xp', t('02'), null, 1, 16)];
        const c5 = [rowOf('r', 'q2', 'metric', 'quizzes', t('03'), null, 1, 2)];
        const { kinds } = outcomesOf(
          await store.commitBatch([
            commitOf('o', 2, { ledger: [rowOf('o', 'o3', 'metric', 'lessons', t('09'))] }),
            commitOf('r', 4, { ledger: c4 }),
            commitOf('r', 4, { ledger: [rowOf('r', 'refused', 'metric', 'lessons', t('09'))] }),
            commitOf('x', 0, { ledger: [rowOf('x', 'x1', 'metric', 'lessons', t('09'))] }),
            commitOf('o', 3, { ledger: [rowOf('o', 'o4', 'metric', 'lessons', t('09'))] }),
          ]),
        );
        equal(kinds, ['ok', 'ok', 'conflict', 'ok', 'ok'], 'batch outcomes');
        await store.commit(commitOf('r', 5, { ledger: c5 }));
        expected = [...expected, ...c4, ...c5];
      }
      const all = await store.readUserLedger('r', { limit: 1000 });
      equal(all.rows.map((r) => r.id), expected.map((r) => r.id), 'commit order');
      equal(canonical(all.rows), canonical(expected), 'rows read back whole');
      equal(all.next, null, 'no next after the last row');
      equal((await store.readUserLedger('o', { limit: 1000 })).rows.map((r) => r.id), store.commitBatch ? ['o1', 'o2', 'o3', 'o4'] : ['o1', 'o2'], "another user's rows");
      // Reads by kind and key keep their own order (by instant, then insertion).
      equal(
        (await store.readLedger({ userId: 'r', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id),
        store.commitBatch ? ['m5', 'm8', 'm2', 'm3', 'm6', 'm1', 'm7', 'm4'] : ['m5', 'm2', 'm3', 'm6', 'm1', 'm7', 'm4'],
        'readLedger still by instant',
      );
      for (let limit = 1; limit <= expected.length + 1; limit++) {
        equal((await readWholeLedger(store, 'r', limit)).map((r) => r.id), expected.map((r) => r.id), `pages of ${limit}`);
      }
    },
  },
  {
    name: 'readUserLedger: long ledgers over many keys, instants in any order, over a thousand keys',
    async run(store) {
      let seed = 7;
      const random = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed % n;
      };
      const instant = () => new Date(Date.UTC(2026, 3, 1 + random(20), random(24), random(4) * 15)).toISOString();
      const expected: LedgerRow[] = [];
      let version = 0;
      let n = 0;
      const commitRows = async (rows: LedgerRow[]) => {
        await store.commit(commitOf('long', version++, { ledger: rows }));
        expected.push(...rows);
      };
      for (let c = 0; c < 10; c++) await commitRows(Array.from({ length: 25 }, () => rowOf('long', `r${n++}`, random(4) === 0 ? 'points' : 'metric', `k${random(20)}`, instant(), null, 1, n)));
      await commitRows(Array.from({ length: 1030 }, (_, i) => rowOf('long', `r${n++}`, 'achievement', `a${i}`, instant(), { completionId: `c${i}` }, 0, 0)));
      await commitRows(Array.from({ length: 5 }, () => rowOf('long', `r${n++}`, 'metric', `k${random(20)}`, instant(), null, 1, n)));
      await commitRows([rowOf('long', `r${n++}`, 'achievement', 'a3', instant(), { completionId: 'again' }, 0, 0)]);
      const ids = expected.map((r) => r.id);
      equal((await readWholeLedger(store, 'long', 1000)).map((r) => r.id), ids, 'pages of 1000');
      equal((await readWholeLedger(store, 'long', 97)).map((r) => r.id), ids, 'pages of 97');
      const all = await readWholeLedger(store, 'long', 500);
      equal(canonical(all), canonical(expected), 'rows read back whole');
      // Each key's rows by instant, then in the order they came.
      for (const [kind, key] of [['metric', 'k0'], ['metric', 'k7'], ['points', 'k3'], ['achievement', 'a3']] as const) {
        const mine = expected.filter((r) => r.kind === kind && r.key === key);
        const byInstant = mine.map((r, i) => [r, i] as const).sort((x, y) => (x[0].at < y[0].at ? -1 : x[0].at > y[0].at ? 1 : x[1] - y[1])).map(([r]) => r.id);
        equal((await store.readLedger({ userId: 'long', kind, key, order: 'asc' })).map((r) => r.id), byInstant, `readLedger ${kind} ${key}`);
      }
    },
  },
  {
    name: 'readUserLedger: paging, cursors and unknown users',
    async run(store) {
      const at = '2026-03-01T00:00:00.000Z';
      equal(await store.readUserLedger('nobody', { limit: 10 }), { rows: [], next: null }, 'an unknown user');
      await store.commit(commitOf('empty', 0));
      equal(await store.readUserLedger('empty', { limit: 10 }), { rows: [], next: null }, 'a user without rows');
      const rows = Array.from({ length: 5 }, (_, i) => rowOf('p', `e${i}`, i % 2 === 0 ? 'metric' : 'points', i % 2 === 0 ? 'lessons' : 'xp', at, null, 1, i + 1));
      await store.commit(commitOf('p', 0, { ledger: rows.slice(0, 2) }));
      await store.commit(commitOf('p', 1, { ledger: rows.slice(2, 4) }));
      // next is null exactly with the page that holds the last row: a full last page says so itself.
      const first = await store.readUserLedger('p', { limit: 2 });
      equal(first.rows.map((r) => r.id), ['e0', 'e1'], 'first page');
      assert(first.next !== null, 'more rows after the first page');
      const second = await store.readUserLedger('p', { after: first.next, limit: 2 });
      equal(second.rows.map((r) => r.id), ['e2', 'e3'], 'second page');
      equal(second.next, null, 'a full page with the last row has no next');
      const whole = await store.readUserLedger('p', { limit: 4 });
      equal([whole.rows.length, whole.next], [4, null], 'all rows in one page of exactly their number');
      // A cursor stays valid as the user's ledger grows: the rows after it follow in commit order.
      await store.commit(commitOf('p', 2, { ledger: rows.slice(4) }));
      equal((await store.readUserLedger('p', { after: first.next, limit: 10 })).rows.map((r) => r.id), ['e2', 'e3', 'e4'], 'a cursor read again after more commits');
      const firstAgain = await store.readUserLedger('p', { limit: 4 });
      assert(firstAgain.next !== null, 'more rows after four');
      equal(await store.readUserLedger('p', { after: firstAgain.next, limit: 4 }), { rows: [rows[4]], next: null }, 'the last page');
      equal((await store.readUserLedger('p', { after: first.next, limit: 1 })).rows.map((r) => r.id), ['e2'], 'the same cursor again, limit 1');
      // Rows read back are the committed values, not the caller's objects.
      (rows[0] as LedgerRow).delta = 99;
      equal((await store.readUserLedger('p', { limit: 1 })).rows[0]?.delta, 1, 'rows kept by value');
    },
  },
  {
    name: "ledger rows of kind 'user' and 'achievement', and metric rows with data, read back by value",
    async run(store) {
      const at = '2026-03-02T09:30:00.000Z';
      const user = { email: 'ann@example.com', name: 'Ann', tz: 'Europe/Paris', attributes: { plan: 'pro', 'é': '😀' } };
      const rows = [
        rowOf('d', 'd1', 'user', 'user', at, { user }, 0, 0),
        rowOf('d', 'e1', 'metric', 'lessons', at, { attributes: { course: 'fr', level: '2' }, idempotencyKey: 'k-1', user: { name: 'Ann B', attributes: {} } }, 2.5, 2.5),
        rowOf('d', 'e2', 'metric', 'lessons', at, { idempotencyKey: 'k-2' }, -0.5, 2),
        rowOf('d', 'e3', 'metric', 'lessons', at, null, 1, 3),
        rowOf('d', 'c1', 'achievement', 'first-lesson', at, { completionId: 'c1', user: { email: null } }, 0, 0),
        rowOf('d', 'c2', 'achievement', 'api-only', at, { completionId: 'c2' }, 0, 0),
      ];
      const sent = canonical(rows);
      await store.commit(commitOf('d', 0, { ledger: rows }));
      // The caller may reuse its objects.
      ((rows[1] as LedgerRow).data as { attributes: Record<string, string> }).attributes.course = 'changed';
      (rows[0] as LedgerRow).kind = 'metric';
      const expected = JSON.parse(sent) as LedgerRow[];
      equal(canonical((await store.readUserLedger('d', { limit: 10 })).rows), canonical(expected), 'readUserLedger');
      equal(canonical(await store.readLedger({ userId: 'd', kind: 'user', key: 'user', order: 'asc' })), canonical(expected.slice(0, 1)), "readLedger of kind 'user'");
      equal(canonical(await store.readLedger({ userId: 'd', kind: 'metric', key: 'lessons', order: 'asc' })), canonical(expected.slice(1, 4)), 'readLedger of metric rows with data');
      equal(canonical(await store.readLedger({ userId: 'd', kind: 'achievement', key: 'first-lesson', order: 'asc' })), canonical(expected.slice(4, 5)), "readLedger of kind 'achievement'");
      equal(canonical(await store.readLedger({ userId: 'd', kind: 'achievement', key: 'api-only', order: 'desc' })), canonical(expected.slice(5)), "readLedger of another achievement's key");
      equal(await store.readLedger({ userId: 'd', kind: 'metric', key: 'user', order: 'asc' }), [], 'kinds are apart');
    },
  },
  {
    name: 'listUsers: ids in code-unit order, paged after any id, existing or not',
    async run(store) {
      equal(await store.listUsers({ limit: 10 }), [], 'an empty store');
      equal(await store.listUsers({ after: 'a', limit: 10 }), [], 'an empty store, after an id');
      // Code-unit order (JavaScript's <): upper case before lower case, then Latin-1, then characters above
      // U+FFFF (surrogates D800..DFFF) before U+E000..U+FFFF, where UTF-8 byte order puts them last.
      const ids = ['b', 'a', '\uFFFF', '😀', 'B', 'é', '\uE000', '𐀀', 'ab', 'a b', 'A', 'z9', '1'];
      const sorted = codeUnitOrder(ids);
      equal(sorted, ['1', 'A', 'B', 'a', 'a b', 'ab', 'b', 'z9', 'é', '𐀀', '😀', '\uE000', '\uFFFF'], 'the expected order');
      for (const [i, id] of ids.entries()) {
        // Some users created one by one, some in a batch (when the store has commitBatch).
        if (store.commitBatch && i >= 8) continue;
        await store.commit(commitOf(id, 0, { ledger: [metricRow(id, `e-${i}`, '2026-03-03T00:00:00.000Z', 1, 1)] }));
      }
      if (store.commitBatch) {
        const { kinds } = outcomesOf(
          await store.commitBatch([
            ...ids.slice(8).map((id) => commitOf(id, 0)),
            // Refused: creates nobody.
            commitOf('b', 0),
            commitOf('refused-new', 1),
          ]),
        );
        equal(kinds, [...ids.slice(8).map(() => 'ok'), 'conflict', 'conflict'], 'batch outcomes');
      }
      await rejectsWithConflict(store.commit(commitOf('never', 3)), 'a commit for a user that does not exist');
      // A row about another user does not make a user.
      await store.commit(commitOf('a', 1, { ledger: [metricRow('ghost', 'g1', '2026-03-03T00:00:00.000Z', 1, 1)] }));
      equal(await store.listUsers({ limit: 100 }), sorted, 'all ids');
      equal(await store.listUsers({ limit: 3 }), sorted.slice(0, 3), 'the first page');
      equal(await store.listUsers({ limit: 0 }), [], 'limit 0');
      for (let limit = 1; limit <= sorted.length + 1; limit++) equal(await listAllUsers(store, limit), sorted, `pages of ${limit}`);
      for (const [i, id] of sorted.entries()) equal(await store.listUsers({ after: id, limit: 100 }), sorted.slice(i + 1), `after ${JSON.stringify(id)}`);
      equal(await store.listUsers({ after: '', limit: 100 }), sorted, "after ''");
      equal(await store.listUsers({ after: 'aa', limit: 2 }), ['ab', 'b'], 'after an id that does not exist');
      equal(await store.listUsers({ after: 'zz', limit: 100 }), ['é', '𐀀', '😀', '\uE000', '\uFFFF'], 'after another id that does not exist');
      equal(await store.listUsers({ after: '\uD800\uDC01', limit: 100 }), ['😀', '\uE000', '\uFFFF'], 'after a character above U+FFFF that does not exist');
      equal(await store.listUsers({ after: '\uFFFF', limit: 100 }), [], 'after the last id');
      equal(await store.listUsers({ after: '\uFFFF\uFFFF', limit: 100 }), [], 'after every id');
      // New users appear in their places.
      await store.commit(commitOf('aa', 0));
      await store.commit(commitOf('\uD83D\uDE01', 0));
      equal(await store.listUsers({ after: 'a b', limit: 3 }), ['aa', 'ab', 'b'], 'a new user in its place');
      equal(await store.listUsers({ after: '😀', limit: 2 }), ['😁', '\uE000'], 'another new user in its place');
    },
  },
  {
    name: 'eraseUser removes the state, ledger, idempotency records, entries and rank history of one user, applies its counters, and leaves the others as they were',
    async run(store) {
      const t = (h: string) => `2026-04-01T${h}:00:00.000Z`;
      const rec = (userId: string, key: string, eventId: string): IdempotencyRecord => ({ userId, metricKey: 'lessons', key, eventId, at: t('01') });
      // gone: ahead of a and b on lb|a, in pt|xp (unranked), removed from lb|old, with rows of every kind.
      await store.commit(commitOf('a', 0, { ledger: [metricRow('a', 'a1', t('01'), 1, 1)], leaderboard: [write('lb|a', 'a', 5, t('01'))], counters: { users: 1 }, idempotency: rec('a', 'k1', 'a1') }));
      await store.commit(
        commitOf('gone', 0, {
          ledger: [rowOf('gone', 'g0', 'user', 'user', t('02'), { user: { name: 'Gone' } }, 0, 0), metricRow('gone', 'g1', t('02'), 9, 9), rowOf('gone', 'g2', 'points', 'xp', t('02'), null, 10, 10)],
          leaderboard: [write('lb|a', 'gone', 9, t('02')), write('lb|old', 'gone', 1, t('02')), { ...write('pt|xp', 'gone', 10, t('02')), unranked: true }],
          counters: { users: 1, 'achievement:first': 1 },
          idempotency: rec('gone', 'k1', 'g1'),
        }),
      );
      await store.commit(commitOf('b', 0, { leaderboard: [write('lb|a', 'b', 3, t('03')), { ...write('pt|xp', 'b', 4, t('03')), unranked: true }], counters: { users: 1, 'achievement:first': 1 } }));
      await store.commit(
        commitOf('gone', 1, {
          ledger: [metricRow('gone', 'g3', t('04'), 1, 10), rowOf('gone', 'g4', 'streak', 'streak', t('04'), null, 0, 0)],
          leaderboard: [{ index: 'lb|old', userId: 'gone', remove: true, date: '2026-04-01' }],
          idempotency: rec('gone', 'k2', 'g3'),
        }),
      );
      equal((await store.getEntry('lb|a', 'a'))?.rank, 2, 'a behind gone before the erasure');
      const aLedger = await store.readUserLedger('a', { limit: 100 });
      const aHistory = await store.readRankHistory('lb|a', 'a', 10);

      await rejectsWithConflict(store.eraseUser({ userId: 'gone', expectedVersion: 1, counters: { users: -1 } }), 'a stale version');
      equal((await store.loadUser('gone'))?.version, 2, 'a refused erasure changes nothing');
      equal(await store.getCounters(['users']), { users: 3 }, 'a refused erasure applies no counters');
      equal((await store.getEntry('lb|a', 'gone'))?.rank, 1, 'a refused erasure keeps the entries');

      const result = await store.eraseUser({ userId: 'gone', expectedVersion: 2, counters: { users: -1, 'achievement:first': -1 } });
      equal([result.erased, result.version], [true, 0], 'erased');
      equal(result.indexes, ['lb|a', 'lb|old', 'pt|xp'], 'every index the user had an entry, rank history or a removed entry in');
      equal(await store.loadUser('gone'), null, 'no state');
      equal((await store.loadUsers(['a', 'gone', 'b'])).map((l) => l?.version ?? null), [1, null, 1], 'loadUsers');
      equal(await store.readUserLedger('gone', { limit: 100 }), { rows: [], next: null }, 'no ledger rows');
      for (const [kind, key] of [['metric', 'lessons'], ['points', 'xp'], ['user', 'user'], ['streak', 'streak']] as const) {
        equal(await store.readLedger({ userId: 'gone', kind, key, order: 'asc' }), [], `no ${kind} rows`);
      }
      equal(await store.readEvents('gone', { limit: 10 }), { rows: [], next: null }, 'no events');
      equal([await store.getIdempotencyRecord('gone', 'lessons', 'k1'), await store.getIdempotencyRecord('gone', 'lessons', 'k2')], [null, null], 'no idempotency records');
      for (const index of ['lb|a', 'lb|old', 'pt|xp']) {
        equal(await store.getEntry(index, 'gone'), null, `no entry in ${index}`);
        equal(await store.readRankHistory(index, 'gone', 10), [], `no rank history in ${index}`);
      }
      equal(await store.getCounters(['users', 'achievement:first']), { users: 2, 'achievement:first': 1 }, 'counters');
      equal(await listAllUsers(store, 10), ['a', 'b'], 'listUsers');
      // The others close the gap; their rows, records and history are untouched.
      equal((await store.readRange('lb|a', 0, 10)).map((e) => [e.userId, e.rank, e.value]), [['a', 1, 5], ['b', 2, 3]], 'ranks close the gap');
      equal((await store.getEntry('lb|a', 'b'))?.rank, 2, 'getEntry of another user');
      equal([await store.countEntries('lb|a'), await store.countEntries('pt|xp'), await store.countEntries('pt|xp', { min: 5 }), await store.countEntries('lb|old')], [2, 1, 0, 0], 'counts');
      equal(await store.readUserLedger('a', { limit: 100 }), aLedger, "another user's ledger");
      equal(await store.readRankHistory('lb|a', 'a', 10), aHistory, "another user's rank history");
      equal((await store.getIdempotencyRecord('a', 'lessons', 'k1'))?.eventId, 'a1', "another user's idempotency record");
      // Thresholds count the entries that are left (a store keeping index sizes keeps them right).
      const r = await store.commit(commitOf('a', 1, { leaderboard: [{ ...write('lb|a', 'a', 6, t('05')), thresholdRank: 3 }] }));
      if (r.ranks[0]?.threshold !== undefined) equal(r.ranks[0].threshold, 0, 'threshold of an index that holds fewer entries than the rank');
      equal(r.ranks[0]?.rank, 1, 'rank after the erasure');
      // The same id starts a brand-new user: version 1, only its own rows, its old idempotency keys free.
      equal((await store.commit(commitOf('gone', 0, { ledger: [metricRow('gone', 'n1', t('06'), 1, 1)], idempotency: rec('gone', 'k1', 'n1'), counters: { users: 1 } }))).version, 1, 'created again');
      equal((await store.readUserLedger('gone', { limit: 100 })).rows.map((row) => row.id), ['n1'], 'only the new rows');
      equal((await store.getIdempotencyRecord('gone', 'lessons', 'k1'))?.eventId, 'n1', 'the old key is free again');
      equal(await store.getEntry('lb|a', 'gone'), null, 'no old entry comes back');
      equal(await listAllUsers(store, 10), ['a', 'b', 'gone'], 'listed again');
      const again = await store.commit(commitOf('gone', 1, { leaderboard: [write('lb|a', 'gone', 2, t('07'))] }));
      equal(again.ranks[0]?.rank, 3, 'the new user ranks on its own value');
      equal((await store.readRankHistory('lb|a', 'gone', 10)).map((h) => [h.previousRank, h.rank]), [[null, 3]], 'a new rank history');
    },
  },
  {
    name: 'eraseUser of an absent user changes nothing; a wrong version is a conflict',
    async run(store) {
      equal(await store.eraseUser({ userId: 'nobody', expectedVersion: 0, counters: { users: -1 } }), { erased: false, version: 0, indexes: [] }, 'absent user');
      equal(await store.getCounters(['users']), { users: 0 }, 'no counters applied');
      await rejectsWithConflict(store.eraseUser({ userId: 'nobody', expectedVersion: 1, counters: {} }), 'an absent user at version 1');
      await store.commit(commitOf('u', 0, { counters: { users: 1 } }));
      await rejectsWithConflict(store.eraseUser({ userId: 'u', expectedVersion: 0, counters: { users: -1 } }), 'a present user at version 0');
      equal([(await store.loadUser('u'))?.version, (await store.getCounters(['users'])).users], [1, 1], 'unchanged');
      equal((await store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } })).erased, true, 'erased');
      await rejectsWithConflict(store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } }), 'erased twice');
      equal(await store.getCounters(['users']), { users: 0 }, 'counted once');
    },
  },
  {
    name: 'eraseUser with reset: everything of the user goes, then the reset state, rows and writes are stored at the next version',
    async run(store) {
      const t = (h: string) => `2026-04-02T${h}:00:00.000Z`;
      await store.commit(commitOf('o', 0, { leaderboard: [write('lb|r', 'o', 5, t('01'))], counters: { users: 1 } }));
      await store.commit(
        commitOf('r', 0, {
          ledger: [metricRow('r', 'r1', t('02'), 7, 7), rowOf('r', 'r2', 'points', 'xp', t('02'), null, 3, 3)],
          leaderboard: [write('lb|r', 'r', 7, t('02')), write('lb|gone', 'r', 7, t('02')), { ...write('pt|xp', 'r', 3, t('02')), unranked: true }],
          counters: { users: 1, 'achievement:a': 1 },
          idempotency: { userId: 'r', metricKey: 'lessons', key: 'k', eventId: 'r1', at: t('02') },
        }),
      );
      const state = sampleState('r', 0);
      const reset = {
        state,
        ledger: [rowOf('r', 'u1', 'user', 'user', t('03'), { user: { name: 'R' } }, 0, 0), rowOf('r', 'p1', 'points', 'xp', t('03'), null, 2, 2)],
        leaderboard: [{ ...write('pt|xp', 'r', 2, t('03')), unranked: true }, write('lb|r', 'r', 2, t('03'))],
      };
      await rejectsWithConflict(store.eraseUser({ userId: 'r', expectedVersion: 2, counters: {}, reset }), 'a stale version');
      const result = await store.eraseUser({ userId: 'r', expectedVersion: 1, counters: { 'achievement:a': -1 }, reset });
      equal([result.erased, result.version], [true, 2], 'reset to the next version');
      equal(result.indexes, ['lb|gone', 'lb|r', 'pt|xp'], 'the indexes the user was in before');
      const loaded = await store.loadUser('r');
      equal([loaded?.version, canonical(loaded?.state)], [2, canonical(state)], 'the reset state');
      equal((await store.readUserLedger('r', { limit: 100 })).rows.map((row) => row.id), ['u1', 'p1'], 'only the reset rows');
      equal(await store.getIdempotencyRecord('r', 'lessons', 'k'), null, 'no idempotency records');
      equal(await store.getEntry('lb|gone', 'r'), null, 'no entry where the reset wrote none');
      equal(await store.countEntries('lb|gone'), 0, 'that index is empty');
      equal((await store.getEntry('lb|r', 'r'))?.value, 2, "the reset's own entry");
      equal((await store.readRange('lb|r', 0, 10)).map((e) => [e.userId, e.rank]), [['o', 1], ['r', 2]], 'ranks');
      equal([await store.countEntries('pt|xp'), await store.countEntries('pt|xp', { min: 3 })], [1, 0], 'the totals index holds the new total');
      equal((await store.readRankHistory('lb|r', 'r', 10)).map((h) => [h.previousRank, h.rank, h.value]), [[null, 2, 2]], 'rank history restarts');
      equal(await store.readRankHistory('lb|gone', 'r', 10), [], 'no rank history left elsewhere');
      equal(await store.getCounters(['users', 'achievement:a']), { users: 2, 'achievement:a': 0 }, 'counters');
      equal(await listAllUsers(store, 10), ['o', 'r'], 'still listed');
      equal((await store.commit(commitOf('r', 2))).version, 3, 'commits go on from the new version');
      // An external rank index keeps a marker of the reset in every index the user was in (withRankIndex):
      // a later erasure lists them all, so that it can forget the user there too.
      equal((await store.eraseUser({ userId: 'r', expectedVersion: 3, counters: { users: -1 } })).indexes, ['lb|gone', 'lb|r', 'pt|xp'], 'a later erasure lists the indexes of the reset too');
    },
  },
  {
    name: 'readEvents: metric rows newest first (instant, then metric key, then latest first), paged by cursor, with or without a metric',
    async run(store) {
      const t = (h: string) => `2026-04-03T${h}:00:00.000Z`;
      const m = (id: string, key: string, at: string, data: LedgerRow['data'] = null) => rowOf('ev', id, 'metric', key, at, data, 1, 1);
      await store.commit(commitOf('ev', 0, { ledger: [m('e1', 'lessons', t('01'), { attributes: { course: 'fr' }, idempotencyKey: 'k1' }), m('q1', 'quiz', t('01')), rowOf('ev', 'p1', 'points', 'xp', t('03'))] }));
      await store.commit(commitOf('other', 0, { ledger: [rowOf('other', 'o1', 'metric', 'lessons', t('02'))] }));
      await store.commit(commitOf('ev', 1, { ledger: [m('e2', 'lessons', t('02')), m('e3', 'lessons', t('01'))] }));
      // A row dated before the others (a clock that went back) and a reversal row: both metric rows.
      await store.commit(commitOf('ev', 2, { ledger: [m('q0', 'quiz', t('00')), m('r1', 'lessons', t('03'), { reverses: 'e2' })] }));
      const all = ['r1', 'e2', 'q1', 'e3', 'e1', 'q0'];
      const ids = (rows: LedgerRow[]) => rows.map((r) => r.id);
      equal(ids((await store.readEvents('ev', { limit: 100 })).rows), all, 'every metric, newest first');
      equal((await store.readEvents('ev', { limit: 100 })).next, null, 'no next after the last row');
      equal(ids((await store.readEvents('ev', { metricKey: 'lessons', limit: 100 })).rows), ['r1', 'e2', 'e3', 'e1'], 'one metric');
      equal(ids((await store.readEvents('ev', { metricKey: 'quiz', limit: 100 })).rows), ['q1', 'q0'], 'another metric');
      equal(await store.readEvents('ev', { metricKey: 'none', limit: 10 }), { rows: [], next: null }, 'a metric without rows');
      equal(await store.readEvents('nobody', { limit: 10 }), { rows: [], next: null }, 'an unknown user');
      for (let limit = 1; limit <= all.length + 1; limit++) {
        equal(ids(await readAllEvents(store, 'ev', limit)), all, `pages of ${limit}`);
        equal(ids(await readAllEvents(store, 'ev', limit, 'lessons')), ['r1', 'e2', 'e3', 'e1'], `pages of ${limit}, one metric`);
      }
      const full = (await store.readEvents('ev', { metricKey: 'lessons', limit: 1 })).rows[0];
      equal(canonical((await store.readEvents('ev', { limit: 100 })).rows.find((r) => r.id === 'e1')), canonical(m('e1', 'lessons', t('01'), { attributes: { course: 'fr' }, idempotencyKey: 'k1' })), 'rows read back whole');
      equal(full?.id, 'r1', 'the newest row of one metric');
      // A cursor is a place in the order: valid with or without a metric, and as rows are added.
      const three = await store.readEvents('ev', { limit: 3 });
      equal(ids(three.rows), ['r1', 'e2', 'q1'], 'first page');
      assert(three.next !== null, 'more after three');
      equal(ids((await store.readEvents('ev', { before: three.next, metricKey: 'lessons', limit: 10 })).rows), ['e3', 'e1'], 'the cursor with a metric after it');
      equal(ids((await store.readEvents('ev', { before: three.next, metricKey: 'quiz', limit: 10 })).rows), ['q0'], 'the cursor with the metric of its row');
      await store.commit(commitOf('ev', 3, { ledger: [m('e4', 'lessons', t('01')), m('n1', 'lessons', t('04'))] }));
      equal(ids((await store.readEvents('ev', { before: three.next, limit: 10 })).rows), ['e4', 'e3', 'e1', 'q0'], 'the cursor after more rows');
      await rejectsWithCode(store.readEvents('ev', { before: 'not a cursor', limit: 10 }), 'VALIDATION', 'a malformed cursor');
    },
  },
  {
    name: 'runtime boosts: createBoost and deleteBoost operation rows keep the listing (listBoosts, getBoost) with the commit; eraseUser removes the user\'s boosts',
    async run(store) {
      const t = (h: string) => `2026-03-02T${h}:00:00.000Z`;
      const rec = (id: string, userId: string, system = 'xp') => ({ id, userId, pointsSystemKey: system, name: `Boost ${id}`, start: '2026-03-02', end: id === 'b2' ? null : '2026-03-09', multiplier: 1.5, rounding: 'up' as const });
      const create = (userId: string, rowId: string, b: ReturnType<typeof rec>) => rowOf(userId, rowId, 'operation', 'createBoost', t('01'), { op: 'createBoost', system: b.pointsSystemKey, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, result: { boost: b } } as never, 0, 0);
      const remove = (userId: string, rowId: string, id: string) => rowOf(userId, rowId, 'operation', 'deleteBoost', t('02'), { op: 'deleteBoost', id, result: { id } } as never, 0, 0);
      await store.commit(commitOf('u1', 0, { ledger: [create('u1', 'r1', rec('b3', 'u1')), create('u1', 'r2', rec('b1', 'u1'))] }));
      await store.commit(commitOf('u2', 0, { ledger: [create('u2', 'r3', rec('b2', 'u2')), create('u2', 'r4', rec('c1', 'u2', 'coins'))] }));
      await rejectsWithConflict(store.commit(commitOf('u2', 0, { ledger: [create('u2', 'r5', rec('b9', 'u2'))] })), 'a refused commit');
      equal(await store.getBoost('b9'), null, 'a refused commit keeps no boost');
      equal(await store.getBoost('b3'), rec('b3', 'u1'), 'getBoost');
      equal(await store.getBoost('nope'), null, 'an unknown boost');
      equal((await store.listBoosts('xp', { limit: 10 })).map((b) => b.id), ['b1', 'b2', 'b3'], 'one system, in id order');
      equal(await store.listBoosts('xp', { limit: 10 }), [rec('b1', 'u1'), rec('b2', 'u2'), rec('b3', 'u1')], 'records read back whole');
      equal((await store.listBoosts('xp', { after: 'b1', limit: 1 })).map((b) => b.id), ['b2'], 'a page after a cursor');
      equal((await store.listBoosts('xp', { after: 'b3', limit: 10 })).map((b) => b.id), [], 'after the last');
      equal((await store.listBoosts('coins', { limit: 10 })).map((b) => b.id), ['c1'], 'another system');
      equal(await store.listBoosts('none', { limit: 10 }), [], 'a system without boosts');
      // A deleteBoost row of another user does not remove the boost.
      await store.commit(commitOf('u2', 1, { ledger: [remove('u2', 'r6', 'b3')] }));
      equal((await store.getBoost('b3'))?.userId, 'u1', "another user's deleteBoost row");
      await store.commit(commitOf('u1', 1, { ledger: [remove('u1', 'r7', 'b3')] }));
      equal(await store.getBoost('b3'), null, 'deleted');
      equal((await store.listBoosts('xp', { limit: 10 })).map((b) => b.id), ['b1', 'b2'], 'deleted from the listing');
      await store.eraseUser({ userId: 'u2', expectedVersion: 2, counters: {} });
      equal((await store.listBoosts('xp', { limit: 10 })).map((b) => b.id), ['b1'], 'erased with the user');
      equal(await store.listBoosts('coins', { limit: 10 }), [], 'erased in every system');
      equal(await store.getBoost('b2'), null, 'getBoost after the erasure');
      await store.eraseUser({ userId: 'u1', expectedVersion: 2, counters: {}, reset: { state: sampleState('u1'), ledger: [], leaderboard: [] } });
      equal(await store.listBoosts('xp', { limit: 10 }), [], 'removed by a reset');
    },
  },
  ...edgeChecks(),
  ...atomicityChecks(),
  ...outboxChecks(),
  ...tenancyChecks,
];

/** A change event for the outbox checks. */
const change = (id: string, userId: string | null, at = '2026-03-02T01:00:00.000Z', extra: Partial<ChangeEvent> = {}): ChangeEvent => ({ id, type: 'points.changed', userId, at, payload: { type: 'points.changed', n: id }, ...extra });
const idsOf = (events: readonly StoredChange[]) => events.map((e) => e.id);

/** Every change event of a store's outbox, `limit` at a time. */
async function readAllChanges(store: OutboxStore, limit: number): Promise<StoredChange[]> {
  const out: StoredChange[] = [];
  let after: string | undefined;
  for (let pages = 0; pages <= 10_000; pages++) {
    const page = await store.readChanges(after === undefined ? { limit } : { after, limit });
    assert(page.events.length <= limit, `readChanges: a page of limit ${limit} holds ${page.events.length} events`);
    // An empty page means the end (a store may move `next` past removed events on the way).
    if (page.events.length === 0) return out;
    assert(typeof page.next === 'string' && page.next.length > 0, 'readChanges: next must be a cursor');
    out.push(...page.events);
    after = page.next;
  }
  throw new Error('readChanges: no end after 10,000 pages');
}

/**
 * The checks of {@link OutboxStore} (change notifications). A store without `readChanges` keeps no outbox
 * and passes them as not applicable; a store with it must pass every one.
 */
function outboxChecks(): ConformanceCheck[] {
  const outboxOf = (store: Store): OutboxStore | null => (typeof store.readChanges === 'function' ? (store as OutboxStore) : null);
  return [
    {
      name: 'outbox (OutboxStore): a commit appends its changes in order, atomically; rank_changed is completed from the commit\'s ranks; readChanges pages in commit order',
      async run(store, context) {
        const outbox = outboxOf(store);
        if (!outbox) return context.skip('the store keeps no outbox (OutboxStore is optional)');
        const at = '2026-03-02T01:00:00.000Z';
        await store.commit(commitOf('a', 0, { changes: [change('a1', 'a'), change('a2', 'a')], leaderboard: [write('lb|o', 'a', 5, at)] }));
        const rank = (id: string, userId: string, cap = 10): ChangeEvent => ({ id, type: 'leaderboard.rank_changed', userId, at, payload: { type: 'leaderboard.rank_changed', leaderboard: { key: 'o' } }, rank: { index: 'lb|o', cap } });
        // b enters above a: previous null, rank 1 (kept); c enters below the cap (rank 3 > 2: null, null: dropped).
        await store.commit(commitOf('b', 0, { changes: [rank('b1', 'b')], leaderboard: [write('lb|o', 'b', 9, at)] }));
        await store.commit(commitOf('c', 0, { changes: [rank('c1', 'c', 2)], leaderboard: [write('lb|o', 'c', 1, at)] }));
        await rejectsWithConflict(store.commit(commitOf('a', 0, { changes: [change('x1', 'a')] })), 'a refused commit');
        const all = await readAllChanges(outbox, 100);
        equal(idsOf(all), ['a1', 'a2', 'b1'], 'events in commit order; none of a refused commit; a dropped rank event');
        equal(canonical((all[2]?.payload as { leaderboard: unknown }).leaderboard), canonical({ key: 'o', previousRank: null, rank: 1 }), 'ranks filled');
        equal('rank' in (all[2] as object), false, 'no rank marker stored');
        equal(canonical(all[0]), canonical({ id: 'a1', type: 'points.changed', userId: 'a', at, payload: { type: 'points.changed', n: 'a1' }, position: all[0]?.position }), 'an event read back whole');
        for (const limit of [1, 2, 5]) equal(idsOf(await readAllChanges(outbox, limit)), ['a1', 'a2', 'b1'], `pages of ${limit}`);
        const first = await outbox.readChanges({ limit: 1 });
        equal(idsOf((await outbox.readChanges({ after: first.next, limit: 10 })).events), ['a2', 'b1'], 'after a cursor');
        await rejectsWithCode(outbox.readChanges({ after: 'not a cursor', limit: 10 }), 'VALIDATION', 'a malformed cursor');
      },
    },
    {
      name: 'outbox (OutboxStore): consumer leases: one owner at a time, expiry, advance only by the owner, release keeps the cursor',
      async run(store, context) {
        const outbox = outboxOf(store);
        if (!outbox) return context.skip('the store keeps no outbox (OutboxStore is optional)');
        const t = (s: number) => new Date(Date.parse('2026-03-02T00:00:00.000Z') + s * 1000).toISOString();
        equal(await outbox.claimConsumer({ consumer: 'c', owner: 'A', now: t(0), leaseMs: 10_000 }), { cursor: null }, 'a first claim');
        equal(await outbox.claimConsumer({ consumer: 'c', owner: 'B', now: t(5), leaseMs: 10_000 }), null, 'held by another');
        equal(await outbox.advanceConsumer({ consumer: 'c', owner: 'B', cursor: 'x', now: t(5), leaseMs: 10_000 }), false, 'advance by a non-owner');
        equal(await outbox.advanceConsumer({ consumer: 'c', owner: 'A', cursor: 'p1', now: t(5), leaseMs: 10_000 }), true, 'advance by the owner');
        equal(await outbox.claimConsumer({ consumer: 'c', owner: 'B', now: t(14), leaseMs: 10_000 }), null, 'the advance renewed the lease');
        equal(await outbox.claimConsumer({ consumer: 'c', owner: 'B', now: t(15), leaseMs: 10_000 }), { cursor: 'p1' }, 'taken once ended');
        await outbox.releaseConsumer({ consumer: 'c', owner: 'B' });
        equal(await outbox.claimConsumer({ consumer: 'c', owner: 'A', now: t(16), leaseMs: 10_000 }), { cursor: 'p1' }, 'released: taken at once, cursor kept');
        equal(await outbox.claimConsumer({ consumer: 'd', owner: 'B', now: t(16), leaseMs: 10_000 }), { cursor: null }, 'consumers are independent');
      },
    },
    {
      name: 'outbox (OutboxStore): marks append once (compare and set); claimDue claims due users once, earliest first, ties by code point, leased; erasure forgets events and due',
      async run(store, context) {
        const outbox = outboxOf(store);
        if (!outbox) return context.skip('the store keeps no outbox (OutboxStore is optional)');
        const t = (m: number) => new Date(Date.parse('2026-03-02T00:00:00.000Z') + m * 60_000).toISOString();
        const results = await Promise.all([0, 1, 2].map((i) => outbox.appendChanges({ mark: 'm', expected: null, value: `v${i}`, changes: [change(`s${i}`, null)] })));
        equal(results.filter(Boolean).length, 1, 'one of concurrent appends wins');
        const won = results.indexOf(true);
        equal(await outbox.getMarks(['m', 'none']), { m: `v${won}` }, 'the winner\'s value');
        equal(await outbox.appendChanges({ mark: 'm', expected: 'stale', value: 'w', changes: [change('s9', null)] }), false, 'a stale expectation');
        equal(await outbox.appendChanges({ mark: 'm', expected: `v${won}`, value: 'w', changes: [change('s8', null)] }), true, 'the current expectation');
        equal(idsOf(await readAllChanges(outbox, 100)), [`s${won}`, 's8'], 'appended only by the winners');
        // Ties at one instant by code point (UTF-8 byte order): 'a' < 'z' < U+E000 < U+1F600.
        for (const [id, due] of [['\u{1F600}', t(1)], ['\uE000', t(1)], ['z', t(1)], ['a', t(1)], ['early', t(0)], ['late', t(50)], ['none', null]] as const) {
          await store.commit(commitOf(id, 0, { due }));
        }
        await store.commit(commitOf('a', 1, { due: t(1) }));
        equal(await outbox.claimDue({ now: t(2), limit: 3, leaseMs: 600_000 }), ['early', 'a', 'z'], 'earliest first, ties by code point, at most limit');
        equal(await outbox.claimDue({ now: t(2), limit: 10, leaseMs: 600_000 }), ['\uE000', '\u{1F600}'], 'the rest, each once');
        equal(await outbox.claimDue({ now: t(9), limit: 10, leaseMs: 600_000 }), [], 'leased');
        await store.commit(commitOf('early', 1, { due: null, changes: [change('e1', 'early')] }));
        await store.eraseUser({ userId: 'z', expectedVersion: 1, counters: {} });
        equal(await outbox.claimDue({ now: t(100), limit: 10, leaseMs: 600_000 }), ['a', '\uE000', '\u{1F600}', 'late'], 'leases run out; cleared and erased users are not due');
        await store.eraseUser({ userId: 'early', expectedVersion: 2, counters: {} });
        equal(idsOf(await readAllChanges(outbox, 100)), [`s${won}`, 's8'], 'an erasure removes the user\'s events');
      },
    },
    {
      name: 'outbox (OutboxStore): an erasure takes the user out of the rankings of board-run events and forgets the leaderboard.changed marks that name them; a reset keeps both',
      async run(store, context) {
        const outbox = outboxOf(store);
        if (!outbox) return context.skip('the store keeps no outbox (OutboxStore is optional)');
        const entry = (userId: string, rank: number) => ({ userId, userName: `${userId} name`, rank, value: 10 - rank });
        const run = (id: string, type: ChangeEvent['type'], rankings: unknown[]): ChangeEvent => ({ id, type, userId: null, at: '2026-03-02T01:00:00.000Z', payload: { type, leaderboard: { key: 'weekly', run: { start: '2026-03-02', end: '2026-03-08' }, rankings } } });
        for (const id of ['gone', 'stay', 'reset']) await store.commit(commitOf(id, 0));
        const all = [entry('gone', 1), entry('stay', 2), entry('reset', 3)];
        await outbox.appendChanges({ mark: 'leaderboard.runs|weekly', expected: null, value: '{"last":"2026-03-02","open":["2026-03-02"]}', changes: [run('b1', 'leaderboard.started', all)] });
        const fingerprint = JSON.stringify(all.map((r) => [r.userId, r.rank, r.value]));
        await outbox.appendChanges({ mark: 'leaderboard.changed|weekly|2026-03-02', expected: null, value: `1|${fingerprint}`, changes: [run('b2', 'leaderboard.changed', all)] });
        await outbox.appendChanges({ mark: 'leaderboard.changed|other|2026-03-02', expected: null, value: `1|${JSON.stringify([['stay', 1, 5]])}`, changes: [run('b3', 'leaderboard.finished', [entry('stay', 1)])] });
        // Another type of an event of no user is left as it is, whatever it holds.
        await outbox.appendChanges({ mark: 'points.boost_started|x', expected: null, value: 'gone', changes: [{ ...change('b4', null), payload: { type: 'points.changed', rankings: [entry('gone', 1)] } }] });
        await store.eraseUser({ userId: 'reset', expectedVersion: 1, counters: {}, reset: { state: sampleState('reset'), ledger: [], leaderboard: [] } });
        await store.eraseUser({ userId: 'gone', expectedVersion: 1, counters: { users: -1 } });
        const events = await readAllChanges(outbox, 100);
        equal(idsOf(events), ['b1', 'b2', 'b3', 'b4'], 'the board-run events stay');
        // Each entry as [userId, userName, rank, value] (a store may give a payload's keys in another order).
        type Entry = { userId: string; userName: string; rank: number; value: number };
        const tuples = (list: unknown) => (Array.isArray(list) ? (list as Entry[]).map((r) => [r.userId, r.userName, r.rank, r.value]) : list);
        const rankingsOf = (id: string) => tuples((events.find((e) => e.id === id)?.payload as { leaderboard?: { rankings?: unknown } }).leaderboard?.rankings ?? null);
        equal(rankingsOf('b1'), tuples([entry('stay', 2), entry('reset', 3)]), 'started: without the erased user, the others as they were, a reset user kept');
        equal(rankingsOf('b2'), tuples([entry('stay', 2), entry('reset', 3)]), 'changed: the same');
        equal(rankingsOf('b3'), tuples([entry('stay', 1)]), 'an event not naming the user as it was');
        equal(tuples((events.find((e) => e.id === 'b4')?.payload as { rankings?: unknown }).rankings), tuples([entry('gone', 1)]), 'another type as it was');
        equal(
          await outbox.getMarks(['leaderboard.runs|weekly', 'leaderboard.changed|weekly|2026-03-02', 'leaderboard.changed|other|2026-03-02', 'points.boost_started|x']),
          { 'leaderboard.runs|weekly': '{"last":"2026-03-02","open":["2026-03-02"]}', 'leaderboard.changed|other|2026-03-02': `1|${JSON.stringify([['stay', 1, 5]])}`, 'points.boost_started|x': 'gone' },
          'the leaderboard.changed mark naming the user is forgotten, the others kept',
        );
      },
    },
    {
      name: 'outbox (OutboxStore): pruneChanges removes the oldest events in commit order up to the first newer one, and old delivery outcomes; delivery outcomes read back newest first',
      async run(store, context) {
        const outbox = outboxOf(store);
        if (!outbox) return context.skip('the store keeps no outbox (OutboxStore is optional)');
        const day = (d: number) => `2026-03-0${d}T00:00:00.000Z`;
        await store.commit(commitOf('p', 0, { changes: [change('p1', 'p', day(1)), change('p2', 'p', day(2))] }));
        await store.commit(commitOf('q', 0, { changes: [change('q1', 'q', day(5)), change('q2', 'q', day(1))] }));
        equal(await outbox.pruneChanges({ before: day(3), limit: 1 }), 1, 'at most limit');
        equal(await outbox.pruneChanges({ before: day(3), limit: 100 }), 1, 'up to the first newer event');
        equal(idsOf(await readAllChanges(outbox, 100)), ['q1', 'q2'], 'a late-written old-dated event stays behind a newer one');
        const rec = (eventId: string, attempt: number, ok: boolean) => ({ consumer: 'hook', eventId, attempt, ok, status: ok ? 204 : 500, error: ok ? null : 'HTTP 500', at: day(attempt), ms: 12 });
        await outbox.recordDeliveries([rec('q1', 1, false), rec('q1', 2, true)]);
        await outbox.recordDeliveries([{ ...rec('q2', 3, true), consumer: 'other' }]);
        equal(await outbox.readDeliveries({ consumer: 'hook', limit: 10 }), [rec('q1', 2, true), rec('q1', 1, false)], 'newest first, by consumer');
        equal(await outbox.readDeliveries({ consumer: 'hook', limit: 1 }), [rec('q1', 2, true)], 'limit');
        equal(await outbox.pruneChanges({ before: day(2), limit: 100 }), 0, 'no event to prune');
        equal(await outbox.readDeliveries({ consumer: 'hook', limit: 10 }), [rec('q1', 2, true)], 'delivery outcomes dated before the cutoff pruned too');
      },
    },
  ];
}

/**
 * Runs one check against a fresh store from `factory` (given a fresh {@link ConformanceFaults}); never
 * throws: the outcome says whether it passed, failed (with the error) or did not apply (with the reason).
 */
export async function runConformanceCheck(check: ConformanceCheck, factory: StoreFactory): Promise<CheckOutcome> {
  const faults = new ConformanceFaults();
  const context: ConformanceContext = {
    faults,
    skip(reason: string): never {
      throw new CheckNotApplicable(reason);
    },
  };
  try {
    await check.run(await factory({ faults }), context);
    return { status: 'passed' };
  } catch (error) {
    if (error instanceof CheckNotApplicable) return { status: 'skipped', reason: error.reason };
    return { status: 'failed', error };
  }
}

/**
 * Runs every check (or `checks`) against fresh stores, one after another, and reports which passed, failed
 * and did not apply. The store conforms when `failed` is empty.
 *
 * @example
 * ```ts
 * const report = await runStoreConformance(({ faults }) => createMyStore({ faults }));
 * if (report.failed.length > 0) throw report.failed[0].error;
 * ```
 */
export async function runStoreConformance(factory: StoreFactory, checks: readonly ConformanceCheck[] = storeConformanceChecks): Promise<ConformanceReport> {
  const report: ConformanceReport = { passed: [], failed: [], skipped: [] };
  for (const check of checks) {
    const outcome = await runConformanceCheck(check, factory);
    if (outcome.status === 'passed') report.passed.push(check.name);
    else if (outcome.status === 'skipped') report.skipped.push({ name: check.name, reason: outcome.reason });
    else report.failed.push({ name: check.name, error: outcome.error });
  }
  return report;
}

/** A runtime boost record and the operation rows that create and delete it (see `Store.commit`). */
const boostOf = (id: string, userId: string, system = 'xp') => ({ id, userId, pointsSystemKey: system, name: `Boost ${id}`, start: '2026-06-01', end: '2026-06-30', multiplier: 2, rounding: 'down' as const });
const createBoostRow = (userId: string, rowId: string, at: string, b: ReturnType<typeof boostOf>) =>
  rowOf(userId, rowId, 'operation', 'createBoost', at, { op: 'createBoost', system: b.pointsSystemKey, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, result: { boost: b } } as never, 0, 0);
const deleteBoostRow = (userId: string, rowId: string, at: string, id: string) => rowOf(userId, rowId, 'operation', 'deleteBoost', at, { op: 'deleteBoost', id, result: { id } } as never, 0, 0);

/**
 * Checks of every read's edges: unranked writes, range bounds (`countEntries`, `readLedger`, `readRange`,
 * `readRankHistory`, `listBoosts`), rows of one instant, idempotency scope and erasure of exactly one id.
 */
function edgeChecks(): ConformanceCheck[] {
  return [
    {
      name: 'unranked writes (points totals) are kept and ordered as ranked ones: readRange, getEntry, countEntries; replaced, removed; their ranks are null or right',
      async run(store) {
        const at = (m: string) => `2026-05-01T10:${m}:00.000Z`;
        const u = (id: string, value: number, m: string): LeaderboardWrite => ({ ...write('pt|u', id, value, at(m)), unranked: true });
        const ranksOf = async (c: Commit) => (await store.commit(c)).ranks;
        const results: CommitResult['ranks'][] = [];
        results.push(await ranksOf(commitOf('a', 0, { leaderboard: [u('a', 10, '00')] })));
        results.push(await ranksOf(commitOf('b', 0, { leaderboard: [u('b', 30, '01')] })));
        results.push(await ranksOf(commitOf('c', 0, { leaderboard: [u('c', 10, '02')] })));
        // A ranked and an unranked write in one commit: results in the commit's order.
        results.push(await ranksOf(commitOf('d', 0, { leaderboard: [write('lb|u', 'd', 1, at('00')), u('d', 10, '00')] })));
        const expected = [
          ['pt|u', 'a', 1, 10],
          ['pt|u', 'b', 1, 30],
          ['pt|u', 'c', 3, 10],
          ['lb|u', 'd', 1, 1],
          ['pt|u', 'd', 3, 10],
        ] as const;
        const flat = results.flat();
        equal(flat.map((r) => [r.index, r.userId]), expected.map((e) => [e[0], e[1]]), 'one rank change per write, in order');
        for (const [i, r] of flat.entries()) {
          const [index, userId, rank, value] = expected[i] as (typeof expected)[number];
          assert(r.rank === null || r.rank === rank, `${index} ${userId}: an unranked write's rank is null or right: expected null or ${rank}, got ${r.rank}`);
          assert(r.value === null || r.value === value, `${index} ${userId}: an unranked write's value is null or right: expected null or ${value}, got ${r.value}`);
          assert(r.previousRank === null && r.previousValue === null, `${index} ${userId}: a new entry has no previous rank or value`);
        }
        // Equal values: earlier reachedAt first, then user id (a and d tie on both).
        equal((await store.readRange('pt|u', 0, 10)).map((e) => [e.userId, e.rank, e.value, e.reachedAt]), [['b', 1, 30, at('01')], ['a', 2, 10, at('00')], ['d', 3, 10, at('00')], ['c', 4, 10, at('02')]], 'the unranked index in rank order');
        equal(await store.getEntry('pt|u', 'c'), { userId: 'c', value: 10, reachedAt: at('02'), rank: 4 }, 'getEntry of an unranked write');
        equal([await store.countEntries('pt|u'), await store.countEntries('pt|u', { min: 10 }), await store.countEntries('pt|u', { min: 11 }), await store.countEntries('pt|u', { max: 30 })], [4, 4, 1, 3], 'counts');
        // Replaced (absolute, never added to) and removed.
        const replaced = await ranksOf(commitOf('a', 1, { leaderboard: [u('a', 40, '03')] }));
        assert(replaced[0]?.previousValue === null || replaced[0]?.previousValue === 10, `a replaced unranked write's previous value is null or 10, got ${replaced[0]?.previousValue}`);
        await store.commit(commitOf('b', 1, { leaderboard: [{ index: 'pt|u', userId: 'b', remove: true, date: '2026-05-01', unranked: true }] }));
        equal((await store.readRange('pt|u', 0, 10)).map((e) => [e.userId, e.rank, e.value]), [['a', 1, 40], ['d', 2, 10], ['c', 3, 10]], 'replaced and removed');
        equal(await store.getEntry('pt|u', 'b'), null, 'a removed unranked entry');
        equal(await store.countEntries('pt|u', { min: 10, max: 40 }), 2, 'counts after');
        equal((await store.readRange('lb|u', 0, 10)).map((e) => e.userId), ['d'], 'the ranked write of the same commit');
      },
    },
    {
      name: 'countEntries: min inclusive, max exclusive, each alone or both, empty and fractional ranges',
      async run(store) {
        const values = [['a', 1], ['b', 2], ['c', 2], ['d', 3], ['e', 5], ['f', -1.5], ['g', 2.5]] as const;
        for (const [id, value] of values) await store.commit(commitOf(id, 0, { leaderboard: [write('lb|c', id, value, '2026-05-02T00:00:00.000Z')] }));
        const count = (range?: { min?: number; max?: number }) => store.countEntries('lb|c', range);
        const cases: [{ min?: number; max?: number } | undefined, number][] = [
          [undefined, 7],
          [{}, 7],
          [{ min: 2 }, 5],
          [{ max: 2 }, 2],
          [{ min: 2, max: 3 }, 3],
          [{ min: 3, max: 3 }, 0],
          [{ min: 3, max: 2 }, 0],
          [{ min: 5 }, 1],
          [{ max: 5 }, 6],
          [{ min: 5.5 }, 0],
          [{ max: -1.5 }, 0],
          [{ min: -1.5, max: 1 }, 1],
          [{ min: 2.5, max: 2.75 }, 1],
          [{ min: -10, max: 10 }, 7],
        ];
        for (const [range, n] of cases) equal(await count(range), n, `countEntries ${JSON.stringify(range)}`);
        equal(await store.countEntries('lb|none', { min: 0 }), 0, 'an unknown index with a range');
      },
    },
    {
      name: 'readLedger: from inclusive and to exclusive at row instants, each alone, with limits; rows of one instant in insertion order (reversed when descending)',
      async run(store) {
        const T = (m: number) => `2026-05-03T10:0${m}:00.000Z`;
        const m = (id: string, at: string) => metricRow('u', id, at, 1, 1);
        await store.commit(commitOf('u', 0, { ledger: [m('x1', T(1)), m('x2', T(2)), m('x3', T(2))] }));
        await store.commit(commitOf('v', 0, { ledger: [metricRow('v', 'v1', T(2), 1, 1)] }));
        await store.commit(commitOf('u', 1, { ledger: [m('x4', T(2)), m('x5', T(3)), m('x6', T(1)), metricRow('u', 'o1', T(2), 1, 1, 'other')] }));
        const ids = async (q: Partial<Parameters<Store['readLedger']>[0]>) => (await store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc', ...q })).map((r) => r.id);
        const cases: [Partial<Parameters<Store['readLedger']>[0]>, string[]][] = [
          [{}, ['x1', 'x6', 'x2', 'x3', 'x4', 'x5']],
          [{ order: 'desc' }, ['x5', 'x4', 'x3', 'x2', 'x6', 'x1']],
          [{ from: T(2) }, ['x2', 'x3', 'x4', 'x5']],
          [{ to: T(2) }, ['x1', 'x6']],
          [{ from: T(2), to: T(3) }, ['x2', 'x3', 'x4']],
          [{ from: T(1), to: T(3) }, ['x1', 'x6', 'x2', 'x3', 'x4']],
          [{ from: T(2), to: T(2) }, []],
          [{ from: T(3), to: T(2) }, []],
          [{ from: '2026-05-03T10:01:00.001Z' }, ['x2', 'x3', 'x4', 'x5']],
          [{ to: '2026-05-03T10:02:00.001Z' }, ['x1', 'x6', 'x2', 'x3', 'x4']],
          [{ from: T(2), to: T(3), order: 'desc' }, ['x4', 'x3', 'x2']],
          [{ from: T(2), to: T(3), order: 'desc', limit: 2 }, ['x4', 'x3']],
          [{ from: T(1), limit: 3 }, ['x1', 'x6', 'x2']],
          [{ to: T(2), order: 'desc', limit: 1 }, ['x6']],
          [{ from: T(3), order: 'desc' }, ['x5']],
          [{ limit: 100 }, ['x1', 'x6', 'x2', 'x3', 'x4', 'x5']],
        ];
        for (const [q, expected] of cases) equal(await ids(q), expected, `readLedger ${JSON.stringify(q)}`);
        equal((await store.readLedger({ userId: 'u', kind: 'metric', key: 'other', order: 'asc', from: T(2), to: T(3) })).map((r) => r.id), ['o1'], 'another key');
        equal((await store.readLedger({ userId: 'v', kind: 'metric', key: 'lessons', order: 'asc', from: T(2), to: T(3) })).map((r) => r.id), ['v1'], 'another user');
      },
    },
    {
      name: 'rows of one instant keep their insertion order in readUserLedger and readEvents (newest first: reverse commit order), over every page size',
      async run(store) {
        const T = '2026-05-04T09:00:00.000Z';
        const m = (id: string, key: string, at = T) => rowOf('s', id, 'metric', key, at, null, 1, 1);
        const c1 = [m('a1', 'lessons'), m('a2', 'lessons'), m('b1', 'quiz')];
        const c2 = [m('a3', 'lessons'), m('b2', 'quiz'), rowOf('s', 'p1', 'points', 'xp', T)];
        const c3 = [m('a4', 'lessons', '2026-05-04T08:59:59.999Z'), m('a5', 'lessons')];
        await store.commit(commitOf('s', 0, { ledger: c1 }));
        await store.commit(commitOf('s', 1, { ledger: c2 }));
        await store.commit(commitOf('s', 2, { ledger: c3 }));
        const all = [...c1, ...c2, ...c3].map((r) => r.id);
        const events = ['b2', 'b1', 'a5', 'a3', 'a2', 'a1', 'a4'];
        const lessons = ['a5', 'a3', 'a2', 'a1', 'a4'];
        for (let limit = 1; limit <= all.length + 1; limit++) {
          equal((await readWholeLedger(store, 's', limit)).map((r) => r.id), all, `readUserLedger, pages of ${limit}`);
          equal((await readAllEvents(store, 's', limit)).map((r) => r.id), events, `readEvents, pages of ${limit}`);
          equal((await readAllEvents(store, 's', limit, 'lessons')).map((r) => r.id), lessons, `readEvents of one metric, pages of ${limit}`);
        }
        equal((await store.readLedger({ userId: 's', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id), ['a4', 'a1', 'a2', 'a3', 'a5'], 'readLedger ascending');
        equal((await store.readLedger({ userId: 's', kind: 'metric', key: 'lessons', order: 'desc', limit: 3 })).map((r) => r.id), ['a5', 'a3', 'a2'], 'readLedger descending');
      },
    },
    {
      name: 'ties on value and reachedAt rank by user id in code-unit order (characters above U+FFFF before U+E000..U+FFFF, unlike UTF-8 byte order), in ranks returned and read',
      async run(store) {
        const tied = ['\uE000', '😀', 'a', '\uFFFF', '𐀀', 'ab', '\u00e9', 'B'];
        const at = '2026-05-08T10:00:00.000Z';
        const sorted = codeUnitOrder(tied);
        equal(sorted, ['B', 'a', 'ab', '\u00e9', '𐀀', '😀', '\uE000', '\uFFFF'], 'the expected order');
        for (const [i, id] of tied.entries()) {
          const r = await store.commit(commitOf(id, 0, { leaderboard: [write('lb|tie', id, 7, at)] }));
          const sofar = codeUnitOrder(tied.slice(0, i + 1));
          equal(r.ranks[0]?.rank, sofar.indexOf(id) + 1, `the rank ${JSON.stringify(id)} was written at`);
        }
        equal((await store.readRange('lb|tie', 0, 20)).map((e) => e.userId), sorted, 'readRange');
        equal((await store.readRange('lb|tie', 4, 2)).map((e) => [e.userId, e.rank]), [['𐀀', 5], ['😀', 6]], 'a page in the middle');
        for (const [i, id] of sorted.entries()) equal((await store.getEntry('lb|tie', id))?.rank, i + 1, `getEntry ${JSON.stringify(id)}`);
      },
    },
    {
      name: 'readRange: offset and limit at the bounds; ranks count from the start of the index; getEntry agrees',
      async run(store) {
        const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
        for (const [i, id] of ids.entries()) await store.commit(commitOf(id, 0, { leaderboard: [write('lb|r', id, 100 - i * 10, '2026-05-05T00:00:00.000Z')] }));
        const page = async (offset: number, limit: number) => (await store.readRange('lb|r', offset, limit)).map((e) => [e.userId, e.rank]);
        const cases: [number, number, [string, number][]][] = [
          [0, 1, [['a', 1]]],
          [0, 0, []],
          [2, 3, [['c', 3], ['d', 4], ['e', 5]]],
          [5, 1, [['f', 6]]],
          [5, 10, [['f', 6]]],
          [6, 1, []],
          [1, 100, [['b', 2], ['c', 3], ['d', 4], ['e', 5], ['f', 6]]],
          [0, 6, ids.map((id, i) => [id, i + 1])],
        ];
        for (const [offset, limit, expected] of cases) equal(await page(offset, limit), expected, `readRange(${offset}, ${limit})`);
        for (const [i, id] of ids.entries()) equal((await store.getEntry('lb|r', id))?.rank, i + 1, `getEntry ${id}`);
        equal(await store.readRange('lb|none', 0, 10), [], 'an unknown index');
      },
    },
    {
      name: 'readRankHistory: newest first; a limit takes the latest rows; unknown users and indexes have none',
      async run(store) {
        for (let d = 1; d <= 5; d++) await store.commit(commitOf('h', d - 1, { leaderboard: [write('lb|rh', 'h', d, `2026-05-0${d}T12:00:00.000Z`)] }));
        await store.commit(commitOf('o', 0, { leaderboard: [write('lb|rh', 'o', 3.5, '2026-05-05T13:00:00.000Z')] }));
        const dates = async (limit: number) => (await store.readRankHistory('lb|rh', 'h', limit)).map((r) => r.date);
        equal(await dates(10), ['2026-05-05', '2026-05-04', '2026-05-03', '2026-05-02', '2026-05-01'], 'every row, newest first');
        equal(await dates(2), ['2026-05-05', '2026-05-04'], 'limit 2: the latest two');
        equal(await dates(1), ['2026-05-05'], 'limit 1');
        equal(await dates(5), ['2026-05-05', '2026-05-04', '2026-05-03', '2026-05-02', '2026-05-01'], 'limit of exactly the rows');
        equal((await store.readRankHistory('lb|rh', 'h', 1))[0], { date: '2026-05-05', previousRank: 1, rank: 1, previousValue: 4, value: 5 }, 'the latest row whole');
        equal(await store.readRankHistory('lb|rh', 'o', 10), [{ date: '2026-05-05', previousRank: null, rank: 2, previousValue: null, value: 3.5 }], "another user's own row");
        equal(await store.readRankHistory('lb|rh', 'nobody', 10), [], 'an unknown user');
        equal(await store.readRankHistory('lb|none', 'h', 10), [], 'an unknown index');
      },
    },
    {
      name: 'listBoosts: paging bounds (limit 0, after an id that does not exist, after the last); getBoost of each',
      async run(store) {
        const at = '2026-05-06T00:00:00.000Z';
        const ids = ['b5', 'b1', 'b3', 'b2'];
        await store.commit(commitOf('u', 0, { ledger: ids.map((id, i) => createBoostRow('u', `r${i}`, at, boostOf(id, 'u'))) }));
        await store.commit(commitOf('v', 0, { ledger: [createBoostRow('v', 'r9', at, boostOf('b4', 'v', 'coins'))] }));
        const list = async (page: { after?: string; limit: number }) => (await store.listBoosts('xp', page)).map((b) => b.id);
        const cases: [{ after?: string; limit: number }, string[]][] = [
          [{ limit: 10 }, ['b1', 'b2', 'b3', 'b5']],
          [{ limit: 0 }, []],
          [{ limit: 1 }, ['b1']],
          [{ after: 'b1', limit: 2 }, ['b2', 'b3']],
          [{ after: 'b4', limit: 10 }, ['b5']],
          [{ after: 'b', limit: 10 }, ['b1', 'b2', 'b3', 'b5']],
          [{ after: '', limit: 10 }, ['b1', 'b2', 'b3', 'b5']],
          [{ after: 'b5', limit: 10 }, []],
          [{ after: 'c', limit: 10 }, []],
        ];
        for (const [page, expected] of cases) equal(await list(page), expected, `listBoosts ${JSON.stringify(page)}`);
        for (const id of ids) equal(await store.getBoost(id), boostOf(id, 'u'), `getBoost ${id}`);
        equal((await store.listBoosts('coins', { limit: 10 })).map((b) => b.id), ['b4'], 'another system');
      },
    },
    {
      name: 'idempotency records are per user: the same metric and key commit for another user, each read back as its own',
      async run(store) {
        await store.commit(commitOf('u1', 0, { idempotency: record('u1', 'k', 'e1') }));
        equal((await store.commit(commitOf('u2', 0, { idempotency: record('u2', 'k', 'e2') }))).version, 1, 'the same key for another user commits');
        equal((await store.commit(commitOf('u1', 1, { idempotency: record('u1', 'k', 'e3', 'other') }))).version, 2, 'the same key for another metric commits');
        equal(await store.getIdempotencyRecord('u1', 'lessons', 'k'), record('u1', 'k', 'e1'), "the first user's record");
        equal(await store.getIdempotencyRecord('u2', 'lessons', 'k'), record('u2', 'k', 'e2'), "the second user's record");
        equal(await store.getIdempotencyRecord('u1', 'other', 'k'), record('u1', 'k', 'e3', 'other'), 'the other metric');
        await rejectsWithConflict(store.commit(commitOf('u2', 1, { idempotency: record('u2', 'k', 'e4') })), 'a reused key of the second user');
      },
    },
    {
      name: 'eraseUser erases exactly one id: users whose ids start with it or hold SQL wildcards keep everything; a user with nothing but a state erases cleanly',
      async run(store) {
        const at = '2026-05-07T00:00:00.000Z';
        const ids = ['a', 'ab', 'a%', 'a_', 'A'];
        for (const [i, id] of ids.entries()) {
          await store.commit(
            commitOf(id, 0, {
              ledger: [metricRow(id, `e${i}`, at, 1, 1), createBoostRow(id, `r${i}`, at, boostOf(`b${i}`, id))],
              leaderboard: [write('lb|e', id, 10 - i, at), { ...write('pt|e', id, 10 - i, at), unranked: true }],
              counters: { users: 1 },
              idempotency: record(id, 'k', `e${i}`),
            }),
          );
        }
        const of = async (id: string) => ({
          ledger: (await store.readUserLedger(id, { limit: 100 })).rows.map((r) => r.id),
          entry: (await store.getEntry('pt|e', id))?.value ?? null,
          history: (await store.readRankHistory('lb|e', id, 10)).length,
          record: (await store.getIdempotencyRecord(id, 'lessons', 'k'))?.eventId ?? null,
          boost: (await store.listBoosts('xp', { limit: 100 })).filter((b) => b.userId === id).map((b) => b.id),
        });
        const others = ids.slice(1);
        const kept = await Promise.all(others.map(of));
        const result = await store.eraseUser({ userId: 'a', expectedVersion: 1, counters: { users: -1 } });
        equal(result, { erased: true, version: 0, indexes: ['lb|e', 'pt|e'] }, 'the erasure');
        equal(await of('a'), { ledger: [], entry: null, history: 0, record: null, boost: [] }, 'the erased user has nothing left');
        equal(await Promise.all(others.map(of)), kept, 'the users whose ids start with it, or hold % and _, keep everything');
        equal((await store.readRange('lb|e', 0, 10)).map((e) => [e.userId, e.rank]), [['ab', 1], ['a%', 2], ['a_', 3], ['A', 4]], 'the others close the gap');
        equal(await listAllUsers(store, 10), codeUnitOrder(others), 'listUsers');
        // A user with a state only: no index, no rows.
        await store.commit(commitOf('bare', 0, { counters: { users: 1 } }));
        equal(await store.eraseUser({ userId: 'bare', expectedVersion: 1, counters: { users: -1 } }), { erased: true, version: 0, indexes: [] }, 'a bare user');
        equal(await store.getCounters(['users']), { users: 4 }, 'counters of both erasures');
      },
    },
  ];
}

/** What {@link snapshotOf} reads: the users, indexes, ledgers, counters, records, boost systems and boosts a check touches. */
interface SnapshotScope {
  users: string[];
  indexes: string[];
  ledgers: [LedgerRow['kind'], string][];
  counters: string[];
  records: [string, string, string][];
  systems: string[];
  boosts: string[];
}

/** Everything a store answers about `scope`, read by every read method, as canonical JSON per read. */
async function snapshotOf(store: Store, scope: SnapshotScope): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const put = (name: string, value: unknown) => out.set(name, canonical(value));
  put('loadUsers', await store.loadUsers(scope.users));
  put('listUsers', await listAllUsers(store, 100));
  for (const u of scope.users) {
    put(`readUserLedger ${u}`, await readWholeLedger(store, u, 1000));
    put(`readEvents ${u}`, (await store.readEvents(u, { limit: 1000 })).rows);
    for (const [kind, key] of scope.ledgers) put(`readLedger ${u} ${kind} ${key}`, await store.readLedger({ userId: u, kind, key, order: 'asc' }));
    for (const index of scope.indexes) {
      put(`getEntry ${index} ${u}`, await store.getEntry(index, u));
      put(`readRankHistory ${index} ${u}`, await store.readRankHistory(index, u, 100));
    }
  }
  for (const index of scope.indexes) {
    put(`readRange ${index}`, await store.readRange(index, 0, 100));
    put(`countEntries ${index}`, await store.countEntries(index));
  }
  put('getCounters', await store.getCounters(scope.counters));
  for (const [u, m, k] of scope.records) put(`getIdempotencyRecord ${u} ${m} ${k}`, await store.getIdempotencyRecord(u, m, k));
  for (const system of scope.systems) put(`listBoosts ${system}`, await store.listBoosts(system, { limit: 100 }));
  for (const id of scope.boosts) put(`getBoost ${id}`, await store.getBoost(id));
  return out;
}

/** The reads that differ between two snapshots, described. */
function differences(before: Map<string, string>, after: Map<string, string>): string[] {
  const out: string[] = [];
  for (const [name, was] of before) {
    const now = after.get(name);
    if (now !== was) out.push(`${name}\n    before: ${was.slice(0, 300)}\n    after:  ${String(now).slice(0, 300)}`);
  }
  return out;
}

/**
 * Runs `write` with the N-th fault point armed, for N = 1, 2, ... until it passes every point: each failed
 * run must have changed nothing `scope` reads; the run that passes every point must succeed and change
 * something. Skips (not applicable) when the store called no fault point while the check set it up.
 */
async function failAtEveryPoint(store: Store, context: ConformanceContext, scope: SnapshotScope, label: string, write: () => Promise<unknown>): Promise<void> {
  const { faults } = context;
  if (faults.total === 0) context.skip('the store calls no fault point (FaultInjector.point) in its writes; see StoreFactory');
  const before = await snapshotOf(store, scope);
  for (let n = 1; ; n++) {
    assert(n <= 1000, `${label}: still failing after 1000 fault points`);
    faults.arm(n);
    let error: unknown = null;
    let ok = false;
    try {
      await write();
      ok = true;
    } catch (e) {
      error = e;
    }
    const fired = faults.fired;
    const labels = faults.labels;
    faults.disarm();
    if (ok) {
      assert(fired === null, `${label}: the fault injected at point ${n} (${fired?.label}) was swallowed: the write succeeded`);
      assert(faults.reached > 0 || n > 1, `${label}: the write calls no fault point, though the store's other writes do`);
      assert(differences(before, await snapshotOf(store, scope)).length > 0, `${label}: the write succeeded but changed nothing`);
      return;
    }
    assert(fired !== null, `${label}: failed with no fault injected (point ${n} not reached): ${String(error)}`);
    const changed = differences(before, await snapshotOf(store, scope));
    assert(changed.length === 0, `${label}: failed at point ${n} of ${labels.length} (${fired.label}, after ${labels.slice(0, -1).join(', ') || 'nothing'}), but changed:\n  ${changed.slice(0, 5).join('\n  ')}`);
  }
}

/**
 * The atomicity checks: each write (a commit, a create, a batch, an erasure, a reset) fails at every one of
 * its fault points in turn (see {@link StoreFactory}), and must change nothing each time.
 */
function atomicityChecks(): ConformanceCheck[] {
  const t = (h: string) => `2026-06-01T${h}:00:00.000Z`;
  const scope: SnapshotScope = {
    users: ['a', 'b', 'c'],
    indexes: ['lb|f', 'pt|f', 'lb|g', 'lb|new'],
    ledgers: [['metric', 'lessons'], ['points', 'xp'], ['user', 'user'], ['operation', 'createBoost'], ['operation', 'deleteBoost']],
    counters: ['users', 'x', 'achievement:a'],
    records: [['a', 'lessons', 'k1'], ['a', 'lessons', 'k2'], ['b', 'lessons', 'k3'], ['c', 'lessons', 'k4']],
    systems: ['xp'],
    boosts: ['b1', 'b2', 'b3'],
  };
  /** Users a (version 1) and b (version 2) with rows, ranked and unranked entries, history, counters, records and a boost. */
  const setUp = async (store: Store) => {
    await store.commit(
      commitOf('a', 0, {
        ledger: [metricRow('a', 'a1', t('01'), 1, 1), createBoostRow('a', 'ra1', t('01'), boostOf('b1', 'a'))],
        leaderboard: [write('lb|f', 'a', 5, t('01')), { ...write('pt|f', 'a', 1, t('01')), unranked: true }, write('lb|g', 'a', 2, t('01'))],
        counters: { users: 1, 'achievement:a': 1 },
        idempotency: record('a', 'k1', 'a1'),
      }),
    );
    await store.commit(commitOf('b', 0, { ledger: [metricRow('b', 'b1', t('02'), 3, 3)], leaderboard: [write('lb|f', 'b', 7, t('02'))], counters: { users: 1 } }));
    await store.commit(commitOf('b', 1, { leaderboard: [write('lb|f', 'b', 4, t('03')), write('lb|g', 'b', 3, t('03'))] }));
  };
  /** A commit of a at version 1 that writes one of everything. */
  const full = (userId: string, version: number, n: string): Commit =>
    commitOf(userId, version, {
      ledger: [
        metricRow(userId, `${n}m`, t('04'), 2, 3),
        rowOf(userId, `${n}p`, 'points', 'xp', t('04'), null, 5, 5),
        createBoostRow(userId, `${n}c`, t('04'), boostOf(n === 'x' ? 'b2' : 'b3', userId)),
        ...(userId === 'a' ? [deleteBoostRow('a', `${n}d`, t('04'), 'b1')] : []),
      ],
      leaderboard: [
        write('lb|f', userId, 9, t('04')),
        { ...write('pt|f', userId, 5, t('04')), unranked: true },
        { index: 'lb|g', userId, remove: true, date: '2026-06-01' },
        write('lb|new', userId, 1, t('04')),
      ],
      counters: { users: version === 0 ? 1 : 0, x: 2 },
      idempotency: record(userId, userId === 'a' ? 'k2' : userId === 'b' ? 'k3' : 'k4', `${n}m`),
    });
  return [
    {
      name: 'atomicity (fault injection): a commit that fails at any statement changes nothing: state, version, ledger, entries and ranks, rank history, counters, idempotency records, boosts',
      async run(store, context) {
        await setUp(store);
        await failAtEveryPoint(store, context, scope, 'commit of an existing user', () => store.commit(full('a', 1, 'x')));
        await failAtEveryPoint(store, context, scope, 'commit creating a user', () => store.commit(full('c', 0, 'y')));
        equal((await store.loadUsers(['a', 'c'])).map((u) => u?.version), [2, 1], 'the commits applied once');
      },
    },
    {
      name: 'atomicity (fault injection): a commitBatch that fails at any statement changes nothing, none of its commits',
      async run(store, context) {
        if (!store.commitBatch) return context.skip('the store has no commitBatch (optional)');
        const batch = store.commitBatch.bind(store);
        await setUp(store);
        await failAtEveryPoint(store, context, scope, 'commitBatch', async () => {
          const { kinds } = outcomesOf(await batch([full('c', 0, 'y'), full('a', 1, 'x'), commitOf('b', 1, { counters: { x: 100 } }), commitOf('b', 2, { ledger: [metricRow('b', 'b2', t('05'), 1, 4)], leaderboard: [write('lb|f', 'b', 8, t('05'))] })]));
          equal(kinds, ['ok', 'ok', 'conflict', 'conflict'], 'batch outcomes');
        });
        equal((await store.loadUsers(['a', 'b', 'c'])).map((u) => u?.version), [2, 2, 1], 'the batch applied once');
      },
    },
    {
      name: 'atomicity (fault injection): an eraseUser that fails at any statement changes nothing',
      async run(store, context) {
        await setUp(store);
        await failAtEveryPoint(store, context, scope, 'eraseUser', () => store.eraseUser({ userId: 'a', expectedVersion: 1, counters: { users: -1, 'achievement:a': -1 } }));
        equal(await store.loadUser('a'), null, 'erased once');
        equal(await store.getCounters(['users', 'achievement:a']), { users: 1, 'achievement:a': 0 }, 'counters applied once');
      },
    },
    {
      name: 'atomicity (fault injection): an eraseUser with reset that fails at any statement changes nothing',
      async run(store, context) {
        await setUp(store);
        const reset = { state: sampleState('a', 0), ledger: [rowOf('a', 'ru', 'user', 'user', t('05'), { user: { name: 'A' } }, 0, 0)], leaderboard: [write('lb|f', 'a', 1, t('05'))] };
        await failAtEveryPoint(store, context, scope, 'eraseUser with reset', () => store.eraseUser({ userId: 'a', expectedVersion: 1, counters: { 'achievement:a': -1 }, reset }));
        equal((await store.loadUser('a'))?.version, 2, 'reset once');
        equal((await store.readUserLedger('a', { limit: 10 })).rows.map((r) => r.id), ['ru'], 'only the reset rows');
      },
    },
  ];
}
