/**
 * The tenancy checks of the store conformance suite: for a store with the optional `Store.tenant`, every kind
 * of data is disjoint between tenants and the default tenant, and tenants do not nest. A store without
 * `tenant` gets them as "not applicable".
 */
import type { BoostRecord } from '../core/boosts.js';
import type { ChangeEvent, LedgerRow, UserState } from '../core/types.js';
import type { Commit, OutboxStore, Store } from '../store/types.js';
import { CheckFailed, equal, sampleState } from './checks.js';
import type { ConformanceCheck, ConformanceContext } from './conformance.js';

const AT = '2026-03-02T01:00:00.000Z';

/** A sample state whose user is named after its tenant (what the checks read back to tell tenants apart). */
function stateOf(userId: string, name: string): UserState {
  const state = sampleState(userId, 1);
  return { ...state, user: { ...state.user, name } };
}

const row = (userId: string, id: string, kind: LedgerRow['kind'] = 'metric', key = 'lessons', data: LedgerRow['data'] = null): LedgerRow => ({ id, userId, kind, key, at: AT, delta: 1, total: 1, data });

const boost = (id: string, userId: string): BoostRecord => ({ id, userId, pointsSystemKey: 'xp', name: `Boost ${id}`, start: '2026-03-02', end: null, multiplier: 2, rounding: 'down' });

const createBoostRow = (userId: string, rowId: string, b: BoostRecord): LedgerRow =>
  ({ ...row(userId, rowId, 'operation', 'createBoost', { op: 'createBoost', system: b.pointsSystemKey, name: b.name, start: b.start, end: b.end, multiplier: b.multiplier, rounding: b.rounding, result: { boost: b } } as never), delta: 0, total: 0 });

const deleteBoostRow = (userId: string, rowId: string, id: string): LedgerRow => ({ ...row(userId, rowId, 'operation', 'deleteBoost', { op: 'deleteBoost', id, result: { id } } as never), delta: 0, total: 0 });

/**
 * One user's first commit in a tenant: state named after the tenant, one metric row, an idempotency record,
 * an entry in index `lb` with `value`, a counter, a boost, and (with an outbox) a change event and a due instant.
 */
function firstCommit(store: Store, userId: string, tenant: string, value: number): Commit {
  const c: Commit = {
    userId,
    expectedVersion: 0,
    state: stateOf(userId, tenant),
    ledger: [row(userId, `${tenant}-r1`), createBoostRow(userId, `${tenant}-r2`, boost(`boost-${userId}`, userId))],
    leaderboard: [{ index: 'lb', userId, value, reachedAt: AT, date: AT.slice(0, 10) }],
    counters: { users: 1, [`seen:${tenant}`]: 1 },
    idempotency: { userId, metricKey: 'lessons', key: 'k1', eventId: `${tenant}-e1`, at: AT },
  };
  if (typeof store.readChanges === 'function') {
    c.changes = [{ id: `${tenant}-${userId}-c1`, type: 'points.changed', userId, at: AT, payload: { tenant } } as ChangeEvent];
    c.due = AT;
  }
  return c;
}

/** The store's tenants `acme` and `globex`, or a skip when it has none. */
function tenantsOf(store: Store, context: ConformanceContext): { acme: Store; globex: Store } {
  if (typeof store.tenant !== 'function') context.skip('the store has no tenants (Store.tenant)');
  return { acme: store.tenant('acme'), globex: store.tenant('globex') };
}

/** What a tenant holds of user `u1` and index `lb`, read through every read method. */
async function snapshot(store: Store) {
  const loaded = await store.loadUser('u1');
  return {
    user: loaded ? { name: loaded.state.user.name, version: loaded.version } : null,
    users: await store.listUsers({ limit: 10 }),
    record: (await store.getIdempotencyRecord('u1', 'lessons', 'k1'))?.eventId ?? null,
    ledger: (await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id),
    userLedger: (await store.readUserLedger('u1', { limit: 10 })).rows.map((r) => r.id),
    events: (await store.readEvents('u1', { limit: 10 })).rows.map((r) => r.id),
    entry: await store.getEntry('lb', 'u1'),
    range: (await store.readRange('lb', 0, 10)).map((e) => `${e.userId}:${e.value}:${e.rank}`),
    count: await store.countEntries('lb'),
    history: (await store.readRankHistory('lb', 'u1', 10)).map((h) => h.rank),
    boosts: (await store.listBoosts('xp', { limit: 10 })).map((b) => b.id),
    boost: (await store.getBoost('boost-u1'))?.userId ?? null,
  };
}

export const tenancyChecks: readonly ConformanceCheck[] = [
  {
    name: 'tenants: the same user id, index, counter and idempotency key in two tenants and the default tenant are separate; every read sees only its own tenant',
    async run(store, context) {
      const { acme, globex } = tenantsOf(store, context);
      // The same ids everywhere: none of these commits may conflict with another tenant's.
      await store.commit(firstCommit(store, 'u1', 'default', 5));
      const a = await acme.commit(firstCommit(acme, 'u1', 'acme', 3));
      equal([a.version, a.ranks.map((r) => [r.previousRank, r.rank])], [1, [[null, 1]]], "acme's first commit: version 1, rank 1 in acme's own index");
      await acme.commit(firstCommit(acme, 'u2', 'acme', 9));
      equal(await snapshot(store), {
        user: { name: 'default', version: 1 },
        users: ['u1'],
        record: 'default-e1',
        ledger: ['default-r1'],
        userLedger: ['default-r1', 'default-r2'],
        events: ['default-r1'],
        entry: { userId: 'u1', value: 5, reachedAt: AT, rank: 1 },
        range: ['u1:5:1'],
        count: 1,
        history: [1],
        boosts: ['boost-u1'],
        boost: 'u1',
      }, 'the default tenant reads its own data only');
      equal(await snapshot(acme), {
        user: { name: 'acme', version: 1 },
        users: ['u1', 'u2'],
        record: 'acme-e1',
        ledger: ['acme-r1'],
        userLedger: ['acme-r1', 'acme-r2'],
        events: ['acme-r1'],
        entry: { userId: 'u1', value: 3, reachedAt: AT, rank: 2 },
        range: ['u2:9:1', 'u1:3:2'],
        count: 2,
        history: [1],
        boosts: ['boost-u1', 'boost-u2'],
        boost: 'u1',
      }, 'acme reads its own data only');
      equal(await snapshot(globex), { user: null, users: [], record: null, ledger: [], userLedger: [], events: [], entry: null, range: [], count: 0, history: [], boosts: [], boost: null }, 'globex, never written, reads nothing');
      equal(await store.getCounters(['users', 'seen:default', 'seen:acme']), { users: 1, 'seen:default': 1, 'seen:acme': 0 }, 'default counters');
      equal(await acme.getCounters(['users', 'seen:default', 'seen:acme']), { users: 2, 'seen:default': 0, 'seen:acme': 2 }, 'acme counters');
      equal(await globex.getCounters(['users']), { users: 0 }, 'globex counters');
      // A version check is per tenant: acme's u1 is at version 1 whatever the default tenant's u1 is at.
      await store.commit({ ...firstCommit(store, 'u1', 'default', 6), expectedVersion: 1, idempotency: null, ledger: [], counters: {}, changes: [] });
      // With a deleteBoost row: acme's u1 deletes acme's boost `boost-u1`; the default tenant's u1 keeps its own.
      const again = await acme.commit({ ...firstCommit(acme, 'u1', 'acme', 4), expectedVersion: 1, idempotency: null, ledger: [deleteBoostRow('u1', 'acme-r3', 'boost-u1')], counters: {}, changes: [] });
      equal(again.version, 2, "acme's u1 moves from its own version");
      equal(((await store.loadUser('u1'))?.version ?? 0) + ((await acme.loadUser('u1'))?.version ?? 0), 4, 'both at version 2');
      const boosts = async (s: Store) => [(await s.getBoost('boost-u1'))?.userId ?? null, (await s.listBoosts('xp', { limit: 10 })).map((b) => b.id)];
      equal([await boosts(store), await boosts(acme)], [['u1', ['boost-u1']], [null, ['boost-u2']]], "a deleteBoost row in acme deletes acme's boost only");
      if (typeof store.loadForEvents === 'function' && typeof acme.loadForEvents === 'function') {
        const load = await acme.loadForEvents(['u1', 'u3'], [{ userId: 'u1', metricKey: 'lessons', key: 'k1' }]);
        equal([load.users.map((u) => u?.state.user.name ?? null), load.records.map((r) => r?.eventId ?? null)], [['acme', null], ['acme-e1']], 'loadForEvents in acme');
      }
    },
  },
  {
    name: 'tenants: a batch commits into its own tenant; erasing a user in one tenant leaves the same id in the others',
    async run(store, context) {
      const { acme } = tenantsOf(store, context);
      await store.commit(firstCommit(store, 'u1', 'default', 5));
      if (typeof acme.commitBatch === 'function') {
        const outcomes = await acme.commitBatch([firstCommit(acme, 'u1', 'acme', 3), firstCommit(acme, 'u2', 'acme', 4)]);
        equal(outcomes.map((o) => (o instanceof Error ? o.message : o.version)), [1, 1], 'a batch in acme: both are new users there');
      } else {
        await acme.commit(firstCommit(acme, 'u1', 'acme', 3));
        await acme.commit(firstCommit(acme, 'u2', 'acme', 4));
      }
      const erased = await acme.eraseUser({ userId: 'u1', expectedVersion: 1, counters: { users: -1 } });
      equal([erased.erased, erased.version, erased.indexes], [true, 0, ['lb']], "erased in acme, from acme's index lb");
      const def = await snapshot(store);
      equal(
        [def.user, def.record, def.ledger, def.userLedger, def.range, def.history, def.boost],
        [{ name: 'default', version: 1 }, 'default-e1', ['default-r1'], ['default-r1', 'default-r2'], ['u1:5:1'], [1], 'u1'],
        'the default tenant keeps its u1 whole',
      );
      const mine = await snapshot(acme);
      equal(
        [mine.user, mine.users, mine.record, mine.ledger, mine.userLedger, mine.range, mine.history, mine.boost, mine.boosts],
        [null, ['u2'], null, [], [], ['u2:4:1'], [], null, ['boost-u2']],
        'acme lost u1 only',
      );
      equal(await store.getCounters(['users']), { users: 1 }, "the erasure's counters apply in acme only");
      equal(await acme.getCounters(['users']), { users: 1 }, "acme's counters");
      // The id is free again in acme only: a new user there starts at version 1; the default's stays.
      equal((await acme.commit(firstCommit(acme, 'u1', 'acme', 1))).version, 1, 'a new u1 in acme');
    },
  },
  {
    name: 'tenants: outbox events, consumers, marks, due users and deliveries are per tenant; pruning one tenant leaves the others',
    async run(store, context) {
      const { acme, globex } = tenantsOf(store, context);
      if (typeof store.readChanges !== 'function') context.skip('the store has no outbox (OutboxStore)');
      const out = (s: Store) => s as Store & OutboxStore;
      await store.commit(firstCommit(store, 'u1', 'default', 5));
      await acme.commit(firstCommit(acme, 'u1', 'acme', 3));
      const ids = async (s: Store) => (await out(s).readChanges({ limit: 10 })).events.map((e) => e.id);
      equal([await ids(store), await ids(acme), await ids(globex)], [['default-u1-c1'], ['acme-u1-c1'], []], 'readChanges per tenant');
      // The same consumer name is a different consumer in each tenant.
      const lease = { consumer: 'relay', owner: 'p1', now: AT, leaseMs: 60_000 };
      equal(await out(store).claimConsumer(lease), { cursor: null }, 'default: relay granted');
      equal(await out(acme).claimConsumer({ ...lease, owner: 'p2' }), { cursor: null }, 'acme: relay granted to another owner');
      const next = (await out(acme).readChanges({ limit: 10 })).next;
      equal(await out(acme).advanceConsumer({ ...lease, owner: 'p2', cursor: next }), true, 'acme advances');
      equal(await out(store).claimConsumer(lease), { cursor: null }, "acme's cursor is not the default's");
      // Marks: the same mark is set once per tenant.
      const mark = { mark: 'board|run', expected: null, value: 'done', changes: [] as ChangeEvent[] };
      equal([await out(store).appendChanges(mark), await out(acme).appendChanges(mark), await out(acme).appendChanges(mark)], [true, true, false], 'a mark per tenant');
      equal([await out(globex).getMarks(['board|run']), await out(acme).getMarks(['board|run'])], [{}, { 'board|run': 'done' }], 'getMarks per tenant');
      // Due users: each tenant claims its own.
      const claim = { now: '2026-03-03T00:00:00.000Z', limit: 10, leaseMs: 1000 };
      equal([await out(globex).claimDue(claim), await out(acme).claimDue(claim), await out(store).claimDue(claim)], [[], ['u1'], ['u1']], 'claimDue per tenant');
      await out(acme).recordDeliveries([{ consumer: 'relay', eventId: 'acme-u1-c1', attempt: 1, ok: true, status: 200, error: null, at: AT, ms: 5 }]);
      equal([(await out(store).readDeliveries({ consumer: 'relay', limit: 10 })).length, (await out(acme).readDeliveries({ consumer: 'relay', limit: 10 })).length], [0, 1], 'deliveries per tenant');
      equal(await out(acme).pruneChanges({ before: '2027-01-01T00:00:00.000Z', limit: 100 }), 1, "acme prunes its one event");
      equal([await ids(store), await ids(acme)], [['default-u1-c1'], []], "pruning acme leaves the default's events");
    },
  },
  {
    name: 'tenants do not nest: tenant(id) on a tenant\'s store is the sibling tenant; ids compare exactly',
    async run(store, context) {
      const { acme, globex } = tenantsOf(store, context);
      if (typeof acme.tenant !== 'function') throw new CheckFailed("a tenant's store must have tenant() too");
      await acme.commit(firstCommit(acme, 'u1', 'acme', 3));
      equal((await globex.tenant?.('acme').loadUser('u1'))?.state.user.name ?? null, 'acme', "globex.tenant('acme') is acme");
      equal((await store.tenant?.('acme').loadUser('u1'))?.state.user.name ?? null, 'acme', "tenant('acme') twice is the same tenant");
      equal(await store.tenant?.('Acme').loadUser('u1'), null, 'ids are case-sensitive');
      equal(await store.tenant?.('acme ').loadUser('u1'), null, 'ids are not trimmed');
      equal(await store.loadUser('u1'), null, 'the default tenant is not acme');
    },
  },
];
