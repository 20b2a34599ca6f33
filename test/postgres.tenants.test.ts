/**
 * Tenants of the PostgreSQL store (issue 16, migration 008): the default tenant and two tenants over one schema,
 * with the same user ids, index names, counter names, boost and event ids, consumer names and marks, see only
 * their own data through every read, and writes (commits, batches, erasures, leases, marks, due claims,
 * deliveries, pruning) change only their own tenant. Tenant stores share the store's connection machinery and
 * cost the same round trips. A schema at migration 007 with data upgrades into the default tenant, and the
 * tenant reads are served by indexes that lead with the tenant.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BoostRecord } from '../src/core/boosts.js';
import type { ChangeEvent, LedgerRow } from '../src/core/types.js';
import { isLaurelErrorCode } from '../src/errors.js';
import { createPostgresStore, MIGRATIONS, type PostgresClient, type PostgresStore, type Queryable, type QueryResult } from '../src/postgres.js';
import type { Commit } from '../src/store/types.js';
import { sampleState } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';

const T0 = Date.parse('2026-01-05T10:00:00.000Z');
/** The instant `minutes` after T0, as toISOString writes it. */
const at = (minutes = 0) => new Date(T0 + minutes * 60_000).toISOString();
const DAY = at().slice(0, 10);

const boostOf = (id: string, userId: string, name: string): BoostRecord => ({ id, userId, pointsSystemKey: 'xp', name, start: DAY, end: null, multiplier: 2, rounding: 'down' });
const metricRow = (userId: string, id: string, total: number): LedgerRow => ({ id, userId, kind: 'metric', key: 'lessons', at: at(), delta: 1, total, data: null });
const createBoostRow = (userId: string, id: string, b: BoostRecord): LedgerRow => ({
  id,
  userId,
  kind: 'operation',
  key: 'createBoost',
  at: at(),
  delta: 0,
  total: 0,
  data: { op: 'createBoost', result: { boost: b } } as never,
});
const event = (id: string, userId: string | null, tenant: string): ChangeEvent => ({ id, type: 'points.changed', userId, at: at(), payload: { tenant } }) as ChangeEvent;

/**
 * The first commit of `userId` in a tenant, with the same ids in every tenant (boost `b1`, event `ev-<user>`,
 * idempotency key `k1`, index `lb`, counters `users` and `n`) and values that tell the tenants apart.
 */
function firstCommit(userId: string, tenant: string, value: number): Commit {
  return {
    userId,
    expectedVersion: 0,
    state: { ...sampleState(userId, value), user: { ...sampleState(userId).user, name: `${tenant}:${userId}` } },
    ledger: [metricRow(userId, `${tenant}-${userId}-m`, value), createBoostRow(userId, `${tenant}-${userId}-b`, boostOf(`b-${userId}`, userId, `${tenant} boost`))],
    leaderboard: [{ index: 'lb', userId, value, reachedAt: at(), date: DAY }],
    counters: { users: 1, n: value },
    idempotency: { userId, metricKey: 'lessons', key: 'k1', eventId: `${tenant}-${userId}-e`, at: at() },
    changes: [event(`ev-${userId}`, userId, tenant)],
    due: at(1),
  };
}

// On a real server readChanges shows an event once every transaction older than it has ended, in the whole
// cluster (other test files' included): reads that expect what was just committed wait for that first.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function sync(q: Queryable | null): Promise<void> {
  if (!q) return;
  const target = String((await q.query(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x`)).rows[0]?.x);
  for (let i = 0; i < 1200; i++) {
    if ((await q.query(`SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 AS ok`, [target])).rows[0]?.ok === true) return;
    await sleep(25);
  }
  throw new Error('a transaction older than the test stayed open for 30s');
}

/** Everything a tenant's store shows of users `u1`/`u2`, index `lb`, boosts, counters and the outbox. */
async function snapshot(store: PostgresStore, syncer: Queryable | null) {
  await sync(syncer);
  const loaded = await store.loadUser('u1');
  const changes = await store.readChanges({ limit: 50 });
  return {
    name: loaded?.state.user.name ?? null,
    version: loaded?.version ?? 0,
    loaded: (await store.loadUsers(['u1', 'u2'])).map((u) => u?.state.user.name ?? null),
    users: await store.listUsers({ limit: 10 }),
    usersAfter: await store.listUsers({ after: 'u1', limit: 10 }),
    record: (await store.getIdempotencyRecord('u1', 'lessons', 'k1'))?.eventId ?? null,
    forEvents: (await store.loadForEvents!(['u1'], [{ userId: 'u1', metricKey: 'lessons', key: 'k1' }])).records.map((r) => r?.eventId ?? null),
    ledger: (await store.readLedger({ userId: 'u1', kind: 'metric', key: 'lessons', order: 'asc' })).map((r) => r.id),
    userLedger: (await store.readUserLedger('u1', { limit: 10 })).rows.map((r) => r.id),
    events: (await store.readEvents('u1', { limit: 10 })).rows.map((r) => r.id),
    entry: await store.getEntry('lb', 'u1'),
    range: (await store.readRange('lb', 0, 10)).map((e) => `${e.userId}:${e.value}:${e.rank}`),
    scan: (await store.scanEntries('lb', 0, 10)).map((e) => `${e.userId}:${e.version}`),
    count: await store.countEntries('lb'),
    countAbove: await store.countEntries('lb', { min: 15 }),
    history: (await store.readRankHistory('lb', 'u1', 10)).map((h) => `${h.date}:${h.rank}:${h.value}`),
    counters: await store.getCounters(['users', 'n']),
    boosts: (await store.listBoosts('xp', { limit: 10 })).map((b) => `${b.id}:${b.userId}:${b.name}`),
    boostsAfter: (await store.listBoosts('xp', { after: 'b-u1', limit: 10 })).map((b) => b.id),
    boost: (await store.getBoost('b-u1'))?.name ?? null,
    changes: changes.events.map((e) => `${e.id}:${String(e.payload.tenant)}`),
  };
}

interface Setup {
  /** The default tenant's store over a fresh schema (migrated). */
  store: PostgresStore;
  schema: string;
  /** Runs raw SQL on the same database (EXPLAIN, checks). */
  db: Queryable;
  /** Waits for older transactions before outbox reads (real servers); null on PGlite. */
  syncer: Queryable | null;
}

/**
 * The checks, on one kind of client. `fresh` makes a migrated store over a fresh schema.
 */
function suite(fresh: () => Promise<Setup>) {
  it('the same ids in the default tenant and two tenants are separate: every read sees only its own tenant', async () => {
    const { store, syncer } = await fresh();
    const acme = store.tenant('acme');
    const globex = store.tenant('globex');
    const tenants = [
      ['', store, 10],
      ['acme', acme, 20],
      ['globex', globex, 30],
    ] as const;
    for (const [name, s, value] of tenants) {
      const r = await s.commit(firstCommit('u1', name, value));
      // Rank 1 in each tenant: the others' entries are not counted.
      expect(r).toMatchObject({ version: 1, ranks: [{ rank: 1, previousRank: null }] });
    }
    // A second user in acme only, ahead of u1 there.
    expect((await acme.commit(firstCommit('u2', 'acme', 25))).ranks[0]?.rank).toBe(1);

    const expected = (name: string, value: number) => ({
      name: `${name}:u1`,
      version: 1,
      loaded: [`${name}:u1`, null],
      users: ['u1'],
      usersAfter: [],
      record: `${name}-u1-e`,
      forEvents: [`${name}-u1-e`],
      ledger: [`${name}-u1-m`],
      userLedger: [`${name}-u1-m`, `${name}-u1-b`],
      events: [`${name}-u1-m`],
      entry: { userId: 'u1', value, reachedAt: at(), rank: 1 },
      range: [`u1:${value}:1`],
      scan: ['u1:1'],
      count: 1,
      countAbove: value >= 15 ? 1 : 0,
      history: [`${DAY}:1:${value}`],
      counters: { users: 1, n: value },
      boosts: [`b-u1:u1:${name} boost`],
      boostsAfter: [],
      boost: `${name} boost`,
      changes: [`ev-u1:${name}`],
    });
    expect(await snapshot(store, syncer)).toEqual(expected('', 10));
    expect(await snapshot(globex, syncer)).toEqual(expected('globex', 30));
    expect(await snapshot(acme, syncer)).toEqual({
      ...expected('acme', 20),
      loaded: ['acme:u1', 'acme:u2'],
      users: ['u1', 'u2'],
      usersAfter: ['u2'],
      entry: { userId: 'u1', value: 20, reachedAt: at(), rank: 2 },
      range: ['u2:25:1', 'u1:20:2'],
      scan: ['u2:1', 'u1:1'],
      count: 2,
      countAbove: 2,
      // (u1's history row is its own write's: rank 1, before u2 came ahead.)
      counters: { users: 2, n: 45 },
      boosts: ['b-u1:u1:acme boost', 'b-u2:u2:acme boost'],
      boostsAfter: ['b-u2'],
      changes: ['ev-u1:acme', 'ev-u2:acme'],
    });
    // A tenant nobody wrote to sees nothing.
    const empty = await snapshot(store.tenant('initech'), syncer);
    expect(empty).toMatchObject({ name: null, users: [], record: null, ledger: [], userLedger: [], entry: null, range: [], count: 0, counters: { users: 0, n: 0 }, boosts: [], boost: null, changes: [] });

    // The idempotency key and the user's version are per tenant: a key used in acme is refused there only.
    await expect(acme.commit({ ...firstCommit('u1', 'acme', 1), expectedVersion: 1 })).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(store.tenant('initech').commit({ ...firstCommit('u1', 'initech', 1) })).resolves.toMatchObject({ version: 1 });
  });

  it('batches, resets and erasures change their own tenant only', async () => {
    const { store, syncer } = await fresh();
    const acme = store.tenant('acme');
    for (const [name, s] of [
      ['', store],
      ['acme', acme],
    ] as const) {
      await s.commit(firstCommit('u1', name, 10));
      await s.commit(firstCommit('u2', name, 5));
    }
    // A batch in acme: u1's next commit (its idempotency key is new) and a new user u3.
    const batch = await acme.commitBatch!([
      { ...firstCommit('u1', 'acme', 40), expectedVersion: 1, counters: {}, idempotency: { userId: 'u1', metricKey: 'lessons', key: 'k2', eventId: 'acme-k2', at: at() }, changes: [event('ev-u1-2', 'u1', 'acme')] },
      firstCommit('u3', 'acme', 1),
    ]);
    expect(batch.map((o) => (o instanceof Error ? o.name : o.version))).toEqual([2, 1]);
    expect((await acme.getEntry('lb', 'u1'))?.value).toBe(40);
    expect((await store.getEntry('lb', 'u1'))?.value).toBe(10);
    expect(await store.listUsers({ limit: 10 })).toEqual(['u1', 'u2']);
    expect(await acme.listUsers({ limit: 10 })).toEqual(['u1', 'u2', 'u3']);

    // Erasing u1 in acme: acme's u1 is gone (state, ledger, records, entries, history, boosts, events, due);
    // the default tenant's u1 is untouched.
    const erased = await acme.eraseUser({ userId: 'u1', expectedVersion: 2, counters: { users: -1 } });
    expect(erased).toEqual({ erased: true, version: 0, indexes: ['lb'] });
    const gone = await snapshot(acme, syncer);
    expect(gone).toMatchObject({ name: null, users: ['u2', 'u3'], record: null, ledger: [], userLedger: [], events: [], entry: null, history: [], boost: null });
    expect(gone.range).toEqual(['u2:5:1', 'u3:1:2']);
    expect(gone.counters.users).toBe(2);
    expect(gone.changes).toEqual(['ev-u2:acme', 'ev-u3:acme']);
    const kept = await snapshot(store, syncer);
    expect(kept).toMatchObject({ name: ':u1', version: 1, users: ['u1', 'u2'], record: '-u1-e', ledger: ['-u1-m'], entry: { value: 10, rank: 1 }, boost: ' boost', counters: { users: 2 } });
    expect(kept.changes).toEqual(['ev-u1:', 'ev-u2:']);
    expect(await store.claimDue({ now: at(5), limit: 10, leaseMs: 60_000 })).toEqual(['u1', 'u2']);
    expect(await acme.claimDue({ now: at(5), limit: 10, leaseMs: 60_000 })).toEqual(['u2', 'u3']);

    // Erasing in the default tenant leaves acme's user of that id; the version check is the tenant's own.
    await expect(store.eraseUser({ userId: 'u2', expectedVersion: 2, counters: {} })).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await store.eraseUser({ userId: 'u2', expectedVersion: 1, counters: { users: -1 } })).erased).toBe(true);
    expect((await acme.loadUser('u2'))?.state.user.name).toBe('acme:u2');
    expect((await acme.getEntry('lb', 'u2'))?.rank).toBe(1);

    // A reset in acme stores the new state there only.
    const reset = await acme.eraseUser({
      userId: 'u3',
      expectedVersion: 1,
      counters: {},
      reset: { state: sampleState('u3', 99), ledger: [metricRow('u3', 'acme-u3-reset', 99)], leaderboard: [{ index: 'lb', userId: 'u3', value: 99, reachedAt: at(), date: DAY }] },
    });
    expect(reset).toMatchObject({ erased: true, version: 2 });
    expect((await acme.readRange('lb', 0, 10)).map((e) => e.userId)).toEqual(['u3', 'u2']);
    expect(await store.loadUser('u3')).toBeNull();
    expect(await store.readRange('lb', 0, 10)).toEqual([{ userId: 'u1', value: 10, reachedAt: at(), rank: 1 }]);
  });

  it('consumers, marks, due claims, deliveries and pruning are per tenant', async () => {
    const { store, syncer } = await fresh();
    const acme = store.tenant('acme');
    const globex = store.tenant('globex');
    const all = [store, acme, globex] as const;
    for (const [i, s] of all.entries()) await s.commit(firstCommit('u1', ['', 'acme', 'globex'][i] as string, 10));

    // The same consumer name: each tenant's lease is its own (another owner holds none of them).
    for (const [i, s] of all.entries()) expect(await s.claimConsumer({ consumer: 'relay', owner: `owner${i}`, now: at(), leaseMs: 60_000 })).toEqual({ cursor: null });
    expect(await acme.advanceConsumer({ consumer: 'relay', owner: 'owner1', cursor: 'acme-cursor', now: at(), leaseMs: 60_000 })).toBe(true);
    expect(await acme.advanceConsumer({ consumer: 'relay', owner: 'owner0', cursor: 'stolen', now: at(), leaseMs: 60_000 })).toBe(false);
    expect(await store.claimConsumer({ consumer: 'relay', owner: 'owner0', now: at(), leaseMs: 60_000 })).toEqual({ cursor: null });
    expect(await acme.claimConsumer({ consumer: 'relay', owner: 'owner1', now: at(), leaseMs: 60_000 })).toEqual({ cursor: 'acme-cursor' });
    await globex.releaseConsumer({ consumer: 'relay', owner: 'owner2' });
    expect(await acme.claimConsumer({ consumer: 'relay', owner: 'other', now: at(), leaseMs: 60_000 })).toBeNull();
    expect(await globex.claimConsumer({ consumer: 'relay', owner: 'other', now: at(), leaseMs: 60_000 })).toEqual({ cursor: null });

    // The same mark: set once in each tenant.
    for (const [i, s] of all.entries()) {
      expect(await s.appendChanges({ mark: 'run', expected: null, value: `v${i}`, changes: [event('ev-mark', null, `mark${i}`)] })).toBe(true);
      expect(await s.appendChanges({ mark: 'run', expected: null, value: 'again', changes: [] })).toBe(false);
    }
    expect(await acme.appendChanges({ mark: 'run', expected: 'v0', value: 'x', changes: [] })).toBe(false);
    expect(await acme.appendChanges({ mark: 'run', expected: 'v1', value: 'v1b', changes: [] })).toBe(true);
    expect(await store.getMarks(['run', 'none'])).toEqual({ run: 'v0' });
    expect(await acme.getMarks(['run'])).toEqual({ run: 'v1b' });
    expect(await globex.getMarks(['run'])).toEqual({ run: 'v2' });
    await sync(syncer);
    expect((await globex.readChanges({ limit: 10 })).events.map((e) => `${e.id}:${String(e.payload.tenant)}`)).toEqual(['ev-u1:globex', 'ev-mark:mark2']);

    // The same user due in each tenant: each tenant claims its own.
    for (const s of all) expect(await s.claimDue({ now: at(5), limit: 10, leaseMs: 60_000 })).toEqual(['u1']);
    for (const s of all) expect(await s.claimDue({ now: at(5), limit: 10, leaseMs: 60_000 })).toEqual([]);

    // Deliveries of the same consumer name.
    for (const [i, s] of all.entries()) {
      await s.recordDeliveries([{ consumer: 'relay', eventId: `ev${i}`, attempt: 1, ok: true, status: 200, error: null, at: at(), ms: 3 }]);
    }
    for (const [i, s] of all.entries()) expect((await s.readDeliveries({ consumer: 'relay', limit: 10 })).map((d) => d.eventId)).toEqual([`ev${i}`]);

    // Pruning acme removes acme's events and deliveries only.
    expect(await acme.pruneChanges({ before: at(60), limit: 100 })).toBe(2);
    await sync(syncer);
    expect((await acme.readChanges({ limit: 10 })).events).toEqual([]);
    expect(await acme.readDeliveries({ consumer: 'relay', limit: 10 })).toEqual([]);
    expect((await store.readChanges({ limit: 10 })).events.map((e) => e.id)).toEqual(['ev-u1', 'ev-mark']);
    expect((await store.readDeliveries({ consumer: 'relay', limit: 10 })).map((d) => d.eventId)).toEqual(['ev0']);
    expect(await globex.pruneChanges({ before: at(60), limit: 1 })).toBe(1);
    await sync(syncer);
    expect((await globex.readChanges({ limit: 10 })).events.map((e) => e.id)).toEqual(['ev-mark']);
    expect((await store.readChanges({ limit: 10 })).events.map((e) => e.id)).toEqual(['ev-u1', 'ev-mark']);
  });

  it('tenant ids compare exactly, do not nest, and are never SQL text', async () => {
    const { store, db, schema } = await fresh();
    const acme = store.tenant('acme');
    expect(store.tenant('acme')).toBe(acme);
    expect(acme.tenant('acme')).toBe(acme);
    const globex = acme.tenant('globex');
    expect(store.tenant('globex')).toBe(globex);
    expect(globex.tenant('acme')).toBe(acme);
    expect(acme).not.toBe(store);

    const odd = `x'); DROP TABLE "${schema}".users; --`;
    const names = ['acme', 'Acme', 'acme ', odd, '😀\u00e9', 'a'.repeat(255)];
    for (const [i, name] of names.entries()) await store.tenant(name).commit(firstCommit('u1', name, i + 1));
    for (const [i, name] of names.entries()) {
      const s = store.tenant(name);
      expect((await s.loadUser('u1'))?.state.user.name).toBe(`${name}:u1`);
      expect(await s.getCounters(['n'])).toEqual({ n: i + 1 });
      expect(await s.readRange('lb', 0, 10)).toEqual([{ userId: 'u1', value: i + 1, reachedAt: at(), rank: 1 }]);
    }
    expect(await store.loadUser('u1')).toBeNull();
    const tenants = (await db.query(`SELECT DISTINCT tenant FROM "${schema}".users`)).rows.map((r) => String(r.tenant));
    expect(new Set(tenants)).toEqual(new Set(names));

    for (const bad of ['', 'a\u0000b', 42 as unknown as string]) {
      let error: unknown;
      try {
        store.tenant(bad);
      } catch (e) {
        error = e;
      }
      expect(isLaurelErrorCode(error, 'VALIDATION'), JSON.stringify(bad)).toBe(true);
    }
  });

  it('migrate() on a tenant store migrates the shared schema', async () => {
    const { db } = await fresh();
    const schema = uniq('tenant_migrate');
    const store = createPostgresStore({ client: db as PostgresClient, schema });
    await store.tenant('acme').migrate();
    const applied = (await db.query(`SELECT id FROM "${schema}".migrations ORDER BY id`)).rows.map((r) => r.id);
    expect(applied).toEqual(MIGRATIONS.map((m) => m.id));
    await store.migrate();
    await store.commit(firstCommit('u1', '', 1));
    expect(await store.tenant('acme').loadUser('u1')).toBeNull();
  });
}

/** Runs a migration's SQL as one multi-statement query (simple protocol), as migrate() would statement by statement. */
async function runMigration(exec: (sql: string) => Promise<unknown>, schema: string, id: string) {
  const m = MIGRATIONS.find((x) => x.id === id);
  if (!m) throw new Error(`no migration ${id}`);
  await exec(m.sql.replaceAll('{{schema}}', schema));
}

/** A schema at migration 007 (every migration up to it, recorded as migrate() records them). */
async function schemaAt007(exec: (sql: string) => Promise<unknown>, db: Queryable, schema: string) {
  const upTo = MIGRATIONS.slice(0, MIGRATIONS.findIndex((m) => m.id === '007_outbox') + 1);
  expect(upTo.map((m) => m.id)).toEqual(['001_init', '002_commit_ids_and_tie_order', '003_commit_batch', '004_replay', '005_users', '006_boosts', '007_outbox']);
  for (const m of upTo) await runMigration(exec, schema, m.id);
  await db.query(`CREATE TABLE "${schema}".migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
  for (const m of upTo) await db.query(`INSERT INTO "${schema}".migrations (id) VALUES ($1)`, [m.id]);
}

/** The index names a plan uses, each with the first column of its key. */
async function indexesOf(db: Queryable, schema: string, plan: string): Promise<Record<string, string>> {
  const names = [...new Set([...plan.matchAll(/(?:using|Bitmap Index Scan on) (\w+)/g)].map((m) => m[1] as string))];
  const out: Record<string, string> = {};
  for (const name of names) {
    const r = await db.query(
      `SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
       WHERE n.nspname = $1 AND c.relname = $2`,
      [schema, name],
    );
    out[name] = String(r.rows[0]?.attname);
  }
  return out;
}

/**
 * The upgrade from 007 and the plans of tenant reads. `exec` runs multi-statement SQL on `db`'s database; the
 * store's statements are recorded (text and parameters) to be explained as they were sent.
 */
function upgradeSuite(make: () => { db: Queryable; exec: (sql: string) => Promise<unknown>; client: (recorder: Queryable) => PostgresClient; syncer: Queryable | null }) {
  it('a schema at migration 007 with data upgrades into the default tenant, still readable and writable', async () => {
    const { db, exec, client, syncer } = make();
    const schema = uniq('upgrade007');
    await schemaAt007(exec, db, schema);
    // Data written by 007's own functions (as a store of that version would) and its tables.
    const c1 = firstCommit('u1', 'old', 10);
    const c2 = firstCommit('u2', 'old', 20);
    const out = (await db.query(`SELECT "${schema}".commit_batch($1::jsonb, $2::text, true) AS r`, [JSON.stringify([c1, c2]), 'token'])).rows[0]?.r;
    expect(JSON.stringify(out)).not.toContain('conflict');
    await db.query(`INSERT INTO "${schema}".consumers (name, cursor, owner, lease_until) VALUES ('relay', 'c-old', NULL, NULL)`);
    await db.query(`INSERT INTO "${schema}".marks (mark, value) VALUES ('run', 'v-old')`);
    await db.query(`INSERT INTO "${schema}".deliveries (consumer, event_id, attempt, ok, status, error, at, ms) VALUES ('relay', 'ev-u1', 1, true, 200, NULL, $1, 5)`, [at()]);

    const store = createPostgresStore({ client: client(db), schema });
    await store.migrate();
    const applied = (await db.query(`SELECT id FROM "${schema}".migrations ORDER BY id`)).rows.map((r) => r.id);
    expect(applied).toEqual(MIGRATIONS.map((m) => m.id));
    // The functions without a tenant are gone: one signature each, the tenant last.
    const fns = (await db.query(
      `SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname IN ('commit_batch', 'erase_user', 'read_changes') ORDER BY p.proname`,
      [schema],
    )).rows.map((r) => `${String(r.proname)}(${String(r.args)})`);
    expect(fns).toEqual([
      'commit_batch(commits jsonb, token text, sql_ranks boolean, tenant_id text)',
      'erase_user(e jsonb, token text, sql_ranks boolean, tenant_id text)',
      'read_changes(after_xid xid8, after_seq bigint, lim integer, tenant_id text)',
    ]);
    // The migration's SQL is idempotent: run again, it changes nothing (the reads below see the same data).
    await runMigration(exec, schema, '008_tenants');
    // Every row of every per-tenant table is the default tenant's.
    for (const table of ['users', 'idempotency', 'ledger', 'entries', 'rank_history', 'counters', 'index_sizes', 'entry_removals', 'boosts', 'outbox', 'consumers', 'marks', 'deliveries']) {
      const r = (await db.query(`SELECT count(*)::int AS n, count(*) FILTER (WHERE tenant = '')::int AS d FROM "${schema}".${table}`)).rows[0];
      expect(r?.d, table).toBe(r?.n);
    }

    const before = await snapshot(store, syncer);
    expect(before).toMatchObject({
      name: 'old:u1',
      version: 1,
      users: ['u1', 'u2'],
      record: 'old-u1-e',
      ledger: ['old-u1-m'],
      userLedger: ['old-u1-m', 'old-u1-b'],
      entry: { userId: 'u1', value: 10, rank: 2 },
      range: ['u2:20:1', 'u1:10:2'],
      count: 2,
      counters: { users: 2, n: 30 },
      boosts: ['b-u1:u1:old boost', 'b-u2:u2:old boost'],
      boost: 'old boost',
      changes: ['ev-u1:old', 'ev-u2:old'],
    });
    expect(await store.claimConsumer({ consumer: 'relay', owner: 'me', now: at(), leaseMs: 1000 })).toEqual({ cursor: 'c-old' });
    expect(await store.getMarks(['run'])).toEqual({ run: 'v-old' });
    expect((await store.readDeliveries({ consumer: 'relay', limit: 5 })).map((d) => d.eventId)).toEqual(['ev-u1']);
    expect(await store.claimDue({ now: at(5), limit: 10, leaseMs: 1000 })).toEqual(['u1', 'u2']);
    // A tenant sees none of it.
    expect(await snapshot(store.tenant('acme'), syncer)).toMatchObject({ name: null, users: [], record: null, entry: null, range: [], counters: { users: 0, n: 0 }, boosts: [], changes: [] });
    expect(await store.tenant('acme').getMarks(['run'])).toEqual({});

    // Writes go on where they left off: the stored version, the stored idempotency key, the index sizes.
    await expect(store.commit({ ...c1, expectedVersion: 1 })).rejects.toMatchObject({ code: 'CONFLICT' });
    const next = await store.commit({ ...c1, expectedVersion: 1, idempotency: null, leaderboard: [{ index: 'lb', userId: 'u1', value: 30, reachedAt: at(), date: DAY, thresholdRank: 2 }] });
    expect(next).toMatchObject({ version: 2, ranks: [{ previousRank: 2, rank: 1, threshold: 20 }] });
    expect((await store.eraseUser({ userId: 'u2', expectedVersion: 1, counters: { users: -1 } })).indexes).toEqual(['lb']);
    expect(await store.getBoost('b-u2')).toBeNull();
    expect(await store.countEntries('lb')).toBe(1);
  });

  it('tenant reads (listUsers, readRange, claimDue, readChanges and more) use indexes that lead with the tenant', async () => {
    const { db, exec, client } = make();
    const schema = uniq('tenant_plans');
    await schemaAt007(exec, db, schema);
    // Many default-tenant rows from before the upgrade, a few of a tenant's after it, and statistics.
    await db.query(`SELECT "${schema}".commit_batch($1::jsonb, $2::text, true)`, [JSON.stringify(Array.from({ length: 300 }, (_, i) => firstCommit(`d${String(i).padStart(3, '0')}`, 'old', i))), 'seed']);
    const sent: { text: string; params: unknown[] }[] = [];
    const recorder: Queryable = {
      query: (text: string, params?: unknown[]): Promise<QueryResult> => {
        sent.push({ text, params: params ?? [] });
        return db.query(text, params);
      },
    };
    const store = createPostgresStore({ client: client(recorder), schema });
    await store.migrate();
    const acme = store.tenant('acme');
    await acme.commitBatch!(Array.from({ length: 20 }, (_, i) => firstCommit(`a${i}`, 'acme', i)));
    for (const table of ['users', 'ledger', 'entries', 'outbox', 'boosts', 'deliveries', 'idempotency', 'rank_history']) await db.query(`ANALYZE "${schema}".${table}`);

    const explain = async (text: string, params: unknown[]) => (await db.query(`EXPLAIN ${text}`, params)).rows.map((r) => String(r['QUERY PLAN'])).join('\n');
    /** The plan of what `call` sent last (its one statement). */
    const planOf = async (call: () => Promise<unknown>) => {
      sent.length = 0;
      await call();
      const last = sent[sent.length - 1];
      if (!last) throw new Error('nothing sent');
      return explain(last.text, last.params);
    };
    await db.query('SET enable_seqscan = off');
    try {
      const plans: Record<string, string> = {
        listUsers: await planOf(() => acme.listUsers({ after: 'a1', limit: 5 })),
        listUsersFirst: await planOf(() => acme.listUsers({ limit: 5 })),
        readRange: await planOf(() => acme.readRange('lb', 2, 5)),
        claimDue: await planOf(() => acme.claimDue({ now: at(5), limit: 5, leaseMs: 1000 })),
        loadUser: await planOf(() => acme.loadUser('a1')),
        readLedger: await planOf(() => acme.readLedger({ userId: 'a1', kind: 'metric', key: 'lessons', from: at(-1), to: at(1), order: 'asc' })),
        readUserLedger: await planOf(() => acme.readUserLedger('a1', { limit: 5 })),
        readEvents: await planOf(() => acme.readEvents('a1', { limit: 5 })),
        listBoosts: await planOf(() => acme.listBoosts('xp', { after: 'b-a1', limit: 5 })),
        getBoost: await planOf(() => acme.getBoost('b-a1')),
        readDeliveries: await planOf(() => acme.readDeliveries({ consumer: 'relay', limit: 5 })),
        // read_changes' query (migration 008) as the function runs it.
        readChanges: await explain(
          `SELECT o.xid::text, o.seq::text, o.id FROM "${schema}".outbox o
            WHERE o.tenant = $1 AND (o.xid, o.seq) > ($2::xid8, $3::bigint) AND o.xid < pg_snapshot_xmax(pg_current_snapshot()) ORDER BY o.xid, o.seq LIMIT 10`,
          ['acme', '0', '0'],
        ),
      };
      for (const [name, plan] of Object.entries(plans)) {
        expect(plan, name).not.toContain('Seq Scan');
        const used = await indexesOf(db, schema, plan);
        expect(Object.keys(used).length, `${name}: ${plan}`).toBeGreaterThan(0);
        for (const [index, first] of Object.entries(used)) expect(first, `${name} uses ${index}: ${plan}`).toBe('tenant');
        expect(plan, name).toMatch(/Index Cond: \(+\(?tenant = /);
      }
      // (claimDue sorts the few rows it claimed, after the index gave them in order.)
      for (const name of ['listUsers', 'listUsersFirst', 'readRange', 'readChanges', 'listBoosts', 'readDeliveries', 'readUserLedger', 'readEvents']) {
        expect(plans[name], name).not.toMatch(/Sort/);
      }
    } finally {
      await db.query('SET enable_seqscan = on');
    }
  });
}

// ---- PGlite (pglite mode, the default for PGlite) ----

const lite = new PGlite();
afterAll(() => lite.close());

describe('tenants (PGlite)', () => {
  suite(async () => {
    const schema = uniq('tenants');
    const store = createPostgresStore({ client: lite as unknown as PostgresClient, schema });
    await store.migrate();
    return { store, schema, db: lite as unknown as Queryable, syncer: null };
  });
  upgradeSuite(() => ({ db: lite as unknown as Queryable, exec: (sql) => lite.exec(sql), client: (q) => q as PostgresClient, syncer: null }));
});

describe('tenant stores share the connection machinery and cost the same round trips (PGlite, single connection)', () => {
  it('one connection for every tenant; loadForEvents 1 statement, commit 1, commitBatch 1', async () => {
    let connects = 0;
    let statements = 0;
    const store = createPostgresStore({
      schema: uniq('tenant_trips'),
      connect: () => {
        connects++;
        return { query: (text: string, params?: unknown[]) => (statements++, lite.query(text, params) as unknown as Promise<QueryResult>) };
      },
    });
    await store.migrate();
    const acme = store.tenant('acme');
    const globex = store.tenant('globex');
    // Calls of several tenants at once, queued on the one connection.
    await Promise.all([acme.commit(firstCommit('u1', 'acme', 1)), globex.commit(firstCommit('u1', 'globex', 2)), store.commit(firstCommit('u1', '', 3))]);
    expect(connects).toBe(1);
    for (const s of [acme, globex]) {
      statements = 0;
      const load = await s.loadForEvents!(['u1', 'u9'], [{ userId: 'u1', metricKey: 'lessons', key: 'k1' }]);
      expect(statements).toBe(1);
      expect(load.users.map((u) => u?.version ?? null)).toEqual([1, null]);
      statements = 0;
      await s.commit({ ...firstCommit('u1', 'x', 5), expectedVersion: 1, idempotency: null });
      expect(statements).toBe(1);
      statements = 0;
      const batch = await s.commitBatch!([firstCommit('u2', 'x', 1), firstCommit('u3', 'x', 2)]);
      expect(statements).toBe(1);
      expect(batch.map((o) => (o instanceof Error ? o.name : o.version))).toEqual([1, 1]);
    }
    expect(connects).toBe(1);
  });
});

// ---- A real server: a pg Pool, and one pg.Client (serial mode) ----

describe.skipIf(!PG_URL)('tenants (server, needs LAUREL_PG_URL)', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
  const syncer = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const clients: pg.Client[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    await pool.end();
    await syncer.end();
  });

  describe('pg Pool', () => {
    suite(async () => {
      const schema = uniq('tenants');
      const store = createPostgresStore({ client: pool, schema });
      await store.migrate();
      return { store, schema, db: pool as unknown as Queryable, syncer: syncer as unknown as Queryable };
    });
  });

  describe('upgrade and plans (one pg.Client: the EXPLAINs see its session settings)', () => {
    const conn = new pg.Client({ connectionString: PG_URL });
    beforeAll(() => conn.connect());
    afterAll(() => conn.end());
    upgradeSuite(() => ({ db: conn as unknown as Queryable, exec: (sql) => conn.query(sql), client: (q) => q as PostgresClient, syncer: syncer as unknown as Queryable }));
  });

  describe('one pg.Client (serial mode, reconnecting)', () => {
    suite(async () => {
      const schema = uniq('tenants');
      const store = createPostgresStore({
        schema,
        connect: () => {
          const c = new pg.Client({ connectionString: PG_URL });
          clients.push(c);
          return c;
        },
      });
      await store.migrate();
      return { store, schema, db: pool as unknown as Queryable, syncer: syncer as unknown as Queryable };
    });
  });
});
