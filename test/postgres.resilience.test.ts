/**
 * The PostgreSQL store when things break, without a server (PGlite) and, when LAUREL_PG_URL is set, on a real
 * one: typed errors from every method, commits whose statement's answer was lost (read back: committed, not
 * committed, unknown), and single-connection mode keeping calls from seeing each other's failed writes.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { ConflictError, isLaurelError, StorageUnavailableError, type ChangeEvent, type LaurelError } from '../src/index.js';
import { createPostgresStore, type PostgresStore, type Queryable, type QueryResult } from '../src/postgres.js';
import { sampleState } from '../src/testing/index.js';
import type { Commit } from '../src/store/types.js';
import { PG_URL, uniq } from './servers.js';
import { interceptedPool } from './pg-intercept.js';

const db = new PGlite();
afterAll(() => db.close());
let n = 0;
const schema = () => `resilience_${++n}`;

const dropped = () => Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });

/** A commit that creates or updates a user, with a ledger row, an idempotency record and a leaderboard write. */
function commitOf(userId: string, expectedVersion: number, opts: { idempotency?: boolean; ledger?: boolean; value?: number; counters?: Record<string, number> } = {}): Commit {
  const at = `2026-01-05T10:00:0${expectedVersion % 10}.000Z`;
  const value = opts.value ?? expectedVersion + 1;
  const key = `k${expectedVersion}`;
  return {
    userId,
    expectedVersion,
    state: sampleState(userId, value),
    ledger: opts.ledger === false ? [] : [{ id: `${userId}-v${expectedVersion}`, userId, kind: 'metric', key: 'lessons', at, delta: 1, total: value, data: null }],
    leaderboard: [{ index: 'board', userId, value, reachedAt: at, date: '2026-01-05' }],
    counters: opts.counters ?? (expectedVersion === 0 ? { users: 1 } : {}),
    idempotency: opts.idempotency === false ? null : { userId, metricKey: 'lessons', key, eventId: `e-${userId}-${key}`, at },
  };
}

async function rejection(p: Promise<unknown>): Promise<LaurelError> {
  const e = await p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
  expect(isLaurelError(e), String(e)).toBe(true);
  return e as LaurelError;
}

describe('typed failures', () => {
  it('every method of a store whose database is gone rejects with StorageUnavailableError, the driver error kept as cause', async () => {
    const lite = new PGlite();
    const store = createPostgresStore({ client: lite, schema: 'gone' });
    await store.migrate();
    await store.commit(commitOf('u', 0));
    await expect(store.commit(commitOf('u', 0))).rejects.toBeInstanceOf(ConflictError);
    await lite.close();
    const calls: [string, () => Promise<unknown>][] = [
      ['migrate', () => store.migrate()],
      ['loadUser', () => store.loadUser('u')],
      ['loadUsers', () => store.loadUsers(['u'])],
      ['getIdempotencyRecord', () => store.getIdempotencyRecord('u', 'lessons', 'k0')],
      ['commit', () => store.commit(commitOf('u', 1))],
      ['readLedger', () => store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons', order: 'asc' })],
      ['getEntry', () => store.getEntry('board', 'u')],
      ['readRange', () => store.readRange('board', 0, 10)],
      ['scanEntries', () => store.scanEntries('board', 0, 10)],
      ['countEntries', () => store.countEntries('board')],
      ['readRankHistory', () => store.readRankHistory('board', 'u', 10)],
      ['getCounters', () => store.getCounters(['users'])],
    ];
    for (const [name, call] of calls) {
      const e = await rejection(call());
      expect(e, name).toBeInstanceOf(StorageUnavailableError);
      expect((e as StorageUnavailableError).committed, name).toBe(false);
      expect(e.cause, name).toBeDefined();
      expect(e.message, name).toContain(name);
    }
  });

  it('a server error in a read (bad input reaching SQL) is a StorageUnavailableError too, on every mode', async () => {
    for (const store of [
      createPostgresStore({ client: db, schema: schema() }),
      createPostgresStore({ client: { query: (t: string, p?: unknown[]) => db.query(t, p) }, schema: schema() }),
    ]) {
      await store.migrate();
      const e = await rejection(store.readLedger({ userId: 'u', kind: 'metric', key: 'lessons\u0000', order: 'asc' }));
      expect(e).toBeInstanceOf(StorageUnavailableError);
    }
  });
});

/** The statements that write: a commit's (one per `commit` or `commitBatch` call) and an erasure's. */
const isCommitStatement = (text: string) => text.includes('.commit_batch(') || text.includes('.erase_user(');

/**
 * A client over PGlite whose commit can be made to fail: `before` fails without running it (nothing is
 * committed), `after` runs it and fails once it is done (it committed), `dead` is `after` with every later
 * statement failing too (the connection is gone). `during` runs between the commit and the failure. In
 * `serial` mode the fault hits the commit statement; in `pglite` mode it hits PGlite's COMMIT (the store runs
 * the statement in `transaction()`), where `before` rolls the statement back.
 */
function commitFaults(mode: 'pglite' | 'serial') {
  let fault: null | 'before' | 'after' | 'dead' = null;
  let dead = false;
  let during: (() => Promise<unknown>) | null = null;
  const query = async (text: string, params?: unknown[]): Promise<QueryResult> => {
    if (dead) throw dropped();
    if (mode === 'serial' && isCommitStatement(text) && fault) {
      const f = fault;
      fault = null;
      if (f === 'before') throw dropped();
      await db.query(text, params);
      await during?.();
      if (f === 'dead') dead = true;
      throw dropped();
    }
    return db.query(text, params) as Promise<QueryResult>;
  };
  const client: Queryable & { transaction?: unknown } = { query };
  if (mode === 'pglite') {
    client.transaction = async <T,>(fn: (tx: Queryable) => Promise<T>): Promise<T> => {
      if (dead) throw dropped();
      const f = fault;
      fault = null;
      const result = await db.transaction((tx) => fn(tx as Queryable).then((r) => (f === 'before' ? Promise.reject(dropped()) : r)));
      if (f === 'after' || f === 'dead') {
        await during?.();
        if (f === 'dead') dead = true;
        throw dropped();
      }
      return result;
    };
  }
  return {
    client,
    arm(f: 'before' | 'after' | 'dead', run?: () => Promise<unknown>) {
      fault = f;
      during = run ?? null;
    },
    heal() {
      dead = false;
    },
  };
}

/**
 * A store whose writes fail as armed (`commitFaults`), holding users `u` and `other` at version 1, and the same
 * tables through a healthy client (`direct`): what a normal call returns, and a competing process.
 */
async function faultySetup(mode: 'pglite' | 'serial') {
  const faults = commitFaults(mode);
  const name = schema();
  const store = createPostgresStore({ client: faults.client as never, schema: name, transactions: mode, verifyTimeoutMs: 300 });
  await store.migrate();
  const direct = createPostgresStore({ client: db, schema: name });
  await store.commit(commitOf('u', 0));
  await store.commit(commitOf('other', 0));
  return { faults, store, direct };
}

describe('a commit whose answer was lost is read back', () => {
  for (const mode of ['pglite', 'serial'] as const) {
    describe(mode, () => {
      const setup = () => faultySetup(mode);

      it('committed: the call succeeds; the ranks, lost with the answer, read null (ranksUnavailable)', async () => {
        const { faults, store } = await setup();
        faults.arm('after');
        const result = await store.commit(commitOf('u', 1, { value: 5 }));
        expect(result).toEqual({ version: 2, ranks: [{ index: 'board', userId: 'u', previousRank: null, rank: null, previousValue: null, value: 5 }], ranksUnavailable: true });
        expect((await store.getEntry('board', 'u'))?.rank).toBe(1);
        expect((await store.loadUser('u'))?.version).toBe(2);
        expect(await store.getIdempotencyRecord('u', 'lessons', 'k1')).not.toBeNull();
      });

      it('not committed: StorageUnavailableError with committed false, and nothing changed', async () => {
        const { faults, store } = await setup();
        faults.arm('before');
        const e = await rejection(store.commit(commitOf('u', 1, { value: 5 })));
        expect(e).toBeInstanceOf(StorageUnavailableError);
        expect((e as StorageUnavailableError).committed).toBe(false);
        expect((e.cause as Error).message).toBe('Connection terminated unexpectedly');
        expect((await store.loadUser('u'))?.version).toBe(1);
        expect(await store.getIdempotencyRecord('u', 'lessons', 'k1')).toBeNull();
        expect((await store.getEntry('board', 'u'))?.value).toBe(1);
        // And the same commit goes through afterwards.
        expect((await store.commit(commitOf('u', 1, { value: 5 }))).version).toBe(2);
      });

      it('unreadable: StorageUnavailableError with committed unknown, within verifyTimeoutMs', async () => {
        const { faults, store } = await setup();
        faults.arm('dead');
        const started = Date.now();
        const e = await rejection(store.commit(commitOf('u', 1, { value: 5 })));
        expect(Date.now() - started).toBeLessThan(3_000);
        expect(e).toBeInstanceOf(StorageUnavailableError);
        expect((e as StorageUnavailableError).committed).toBe('unknown');
        faults.heal();
        // It had committed: a retry with the same idempotency key settles it (here: a conflict on the key).
        expect((await store.loadUser('u'))?.version).toBe(2);
      });

      it('newer commits replaced the token: the idempotency record or the first ledger row tells', async () => {
        const { faults, store, direct } = await setup();
        // Another process commits versions 3 and 4 between our commit and its failure.
        faults.arm('after', async () => {
          await direct.commit(commitOf('u', 2));
          await direct.commit(commitOf('u', 3));
        });
        expect((await store.commit(commitOf('u', 1))).version).toBe(2);
        // Without idempotency record but with a ledger row.
        faults.arm('after', () => direct.commit(commitOf('u', 5)));
        expect((await store.commit(commitOf('u', 4, { idempotency: false }))).version).toBe(5);
        // With neither, there is nothing to look up: unknown.
        faults.arm('after', () => direct.commit(commitOf('u', 7)));
        const e = await rejection(store.commit(commitOf('u', 6, { idempotency: false, ledger: false })));
        expect((e as StorageUnavailableError).committed).toBe('unknown');
      });
    });
  }

  it('serial mode with a connect factory: after the connection died during the commit, the outcome is read on a new connection', async () => {
    let opened = 0;
    let fault: 'after' | 'before' | null = null;
    const factory = () => {
      const conn = { dead: false };
      return {
        connect: async () => {
          opened++;
        },
        end: async () => undefined,
        query: async (text: string, params?: unknown[]) => {
          if (conn.dead) throw dropped();
          if (isCommitStatement(text) && fault) {
            const f = fault;
            fault = null;
            conn.dead = true;
            if (f === 'after') await db.query(text, params);
            throw dropped();
          }
          return db.query(text, params) as Promise<QueryResult>;
        },
      };
    };
    const store = createPostgresStore({ connect: factory, schema: schema() });
    await store.migrate();
    await store.commit(commitOf('u', 0));
    expect(opened).toBe(1);
    fault = 'after';
    expect((await store.commit(commitOf('u', 1))).version).toBe(2);
    expect(opened).toBe(2);
    fault = 'before';
    const e = await rejection(store.commit(commitOf('u', 2)));
    expect((e as StorageUnavailableError).committed).toBe(false);
    expect(opened).toBe(3);
    expect((await store.loadUser('u'))?.version).toBe(2);
    expect(opened).toBe(3);
  });
});

describe('an erasure whose answer was lost is read back, never reported as not committed when it was', () => {
  for (const mode of ['pglite', 'serial'] as const) {
    describe(mode, () => {
      const setup = () => faultySetup(mode);

      it('erased, then created again at the same version before the read-back: unknown, not "not committed"', async () => {
        const { faults, store, direct } = await setup();
        faults.arm('after', () => direct.commit(commitOf('u', 0)));
        const e = await rejection(store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } }));
        expect((e as StorageUnavailableError).committed).toBe('unknown');
      });

      it('a reset that committed, then the user erased before the read-back: unknown, not "not committed"', async () => {
        const { faults, store, direct } = await setup();
        const again = commitOf('u', 0);
        faults.arm('after', () => direct.eraseUser({ userId: 'u', expectedVersion: 2, counters: { users: -1 } }));
        const e = await rejection(store.eraseUser({ userId: 'u', expectedVersion: 1, counters: {}, reset: { state: again.state, ledger: again.ledger, leaderboard: again.leaderboard } }));
        expect((e as StorageUnavailableError).committed).toBe('unknown');
      });

      it('erased: read back as done, with the indexes the user was in (read with the version before): an external rank index forgets them', async () => {
        // It was a StorageUnavailableError (committed unknown) whose indexes were lost with the answer: a rank
        // index in front of the store (withRankIndex, Redis) kept the erased user, and a retry said NOT_FOUND.
        const { faults, store } = await setup();
        faults.arm('after');
        expect(await store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } })).toEqual({ erased: true, version: 0, indexes: ['board'] });
        expect(await store.loadUser('u')).toBeNull();
        expect(await store.getCounters(['users'])).toEqual({ users: 1 });
      });

      it('not sent: committed false, nothing changed, and the erasure goes through afterwards', async () => {
        const { faults, store } = await setup();
        faults.arm('before');
        const e = await rejection(store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } }));
        expect((e as StorageUnavailableError).committed).toBe(false);
        expect((await store.loadUser('u'))?.version).toBe(1);
        expect((await store.eraseUser({ userId: 'u', expectedVersion: 1, counters: { users: -1 } })).erased).toBe(true);
      });

      it('a reset that committed: read back as done, with the indexes, and the user is stored again at the next version', async () => {
        const { faults, store } = await setup();
        const again = commitOf('u', 0);
        faults.arm('after');
        expect(await store.eraseUser({ userId: 'u', expectedVersion: 1, counters: {}, reset: { state: again.state, ledger: again.ledger, leaderboard: again.leaderboard } })).toEqual({ erased: true, version: 2, indexes: ['board'] });
        expect((await store.loadUser('u'))?.version).toBe(2);
      });
    });
  }
});

describe.skipIf(!PG_URL)('a commit whose answer was lost, on a server (pg Pool)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
  afterAll(() => pool.end());

  /** A pool whose checked-out connections fail at the commit statement as armed; the real connection is then discarded. */
  function faultyPool() {
    let fault: null | 'before' | 'after' = null;
    const client = interceptedPool(pool, async (text, _params, run) => {
      if (isCommitStatement(text) && fault) {
        const f = fault;
        fault = null;
        if (f === 'before') throw dropped();
        await run();
        throw dropped();
      }
      return run();
    });
    return { client, arm: (f: 'before' | 'after') => (fault = f) };
  }

  it('committed -> success; not sent -> committed false once the broken connection is gone', async () => {
    const faults = faultyPool();
    const store = createPostgresStore({ client: faults.client as never, schema: uniq('ambig') });
    await store.migrate();
    await store.commit(commitOf('u', 0));
    faults.arm('after');
    expect(await store.commit(commitOf('u', 1, { value: 3 }))).toEqual({ version: 2, ranks: [{ index: 'board', userId: 'u', previousRank: null, rank: null, previousValue: null, value: 3 }], ranksUnavailable: true });
    faults.arm('before');
    const e = await rejection(store.commit(commitOf('u', 2)));
    expect(e).toBeInstanceOf(StorageUnavailableError);
    expect((e as StorageUnavailableError).committed).toBe(false);
    expect((await store.loadUser('u'))?.version).toBe(2);
    expect((await store.commit(commitOf('u', 2))).version).toBe(3);
  });
});

/**
 * Single-connection mode: while commits run, other calls' reads fail (a NUL in a text parameter) and commits that fail
 * after writing (a change event without an id, which the outbox's NOT NULL refuses in the function's last
 * statement) run too. None may abort another call's transaction, and
 * no read may see a write that was rolled back.
 */
async function interleave(store: PostgresStore) {
  await store.migrate();
  await store.commit(commitOf('v', 0));
  const rounds = 30;
  const good: unknown[] = [];
  const seenVersions = new Set<number>();
  let badCommits = 0;
  let badReads = 0;
  const commits = (async () => {
    for (let i = 0; i < rounds; i++) good.push(await store.commit(commitOf(`g${i}`, 0)).then(() => 'ok', (e: unknown) => e));
  })();
  const failingReads = (async () => {
    for (let i = 0; i < rounds * 2; i++) {
      await store.readLedger({ userId: 'v', kind: 'metric', key: 'lessons\u0000', order: 'asc' }).then(
        () => undefined,
        (e: unknown) => {
          expect(e).toBeInstanceOf(StorageUnavailableError);
          badReads++;
        },
      );
    }
  })();
  const failingCommits = (async () => {
    for (let i = 0; i < rounds; i++) {
      await store.commit({ ...commitOf('v', 1, { counters: { bad: 1 } }), changes: [{ type: 'metric.recorded', userId: 'v', at: '2026-01-01T00:00:00.000Z', payload: {} } as unknown as ChangeEvent] }).then(
        () => undefined,
        (e: unknown) => {
          expect(e).toBeInstanceOf(StorageUnavailableError);
          badCommits++;
        },
      );
    }
  })();
  const reads = (async () => {
    for (let i = 0; i < rounds * 3; i++) seenVersions.add((await store.loadUser('v'))?.version ?? -1);
  })();
  await Promise.all([commits, failingReads, failingCommits, reads]);
  expect(good).toEqual(Array.from({ length: rounds }, () => 'ok'));
  expect(badReads).toBe(rounds * 2);
  expect(badCommits).toBe(rounds);
  // Version 2 was written by every failing commit and rolled back each time: never visible.
  expect([...seenVersions]).toEqual([1]);
  expect(await store.getCounters(['users', 'bad'])).toEqual({ users: rounds + 1, bad: 0 });
}

describe('single connection: every use of it is queued, so no call runs inside another call\'s transaction', () => {
  it('PGlite behind a query-only client (serial mode)', () => interleave(createPostgresStore({ client: { query: (t: string, p?: unknown[]) => db.query(t, p) } as never, schema: schema() })));
  // PGlite itself runs query() under the same lock as transaction(), so its own mode needs no queue.
  it('PGlite (pglite mode)', () => interleave(createPostgresStore({ client: db, schema: schema() })));
  it.skipIf(!PG_URL)('one pg.Client on a server', async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      await interleave(createPostgresStore({ client: c, schema: uniq('serial') }));
    } finally {
      await c.end();
    }
  });
});
