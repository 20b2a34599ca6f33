/**
 * Prepared statements on `pg` (issue 11): the write path's statements are named (parsed and planned once per
 * connection) on a `pg` Pool or Client, plain on anything else and with `preparedStatements: false`; the
 * answers are the same either way.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, isLaurelErrorCode, type EventResponse } from '../src/index.js';
import { createPostgresStore, type Queryable } from '../src/postgres.js';
import { sequentialIds } from '../src/testing/index.js';
import { PG_URL, uniq } from './servers.js';
import { multiConfig } from './workers/shared.js';

/** The Laurel statements prepared on the connection `q` runs on. */
async function preparedOn(q: Queryable): Promise<string[]> {
  const r = await q.query(`SELECT statement FROM pg_prepared_statements WHERE name LIKE 'laurel\\_%' ORDER BY statement`);
  return r.rows.map((row) => String(row.statement).replace(/\s+/g, ' '));
}

/** The same calls on a store: a new user, the same user again with a key, a replay of that key, a read. */
async function calls(store: ReturnType<typeof createPostgresStore>) {
  let now = Date.parse('2026-03-02T10:00:00Z');
  const engine = createEngine({ config: multiConfig, store, clock: () => new Date((now += 1000)), newId: sequentialIds() });
  const out: unknown[] = [];
  out.push(await engine.recordEvent('lessons', { user: { id: 'p1' }, value: 60 }, { idempotencyKey: 'a' }));
  out.push(await engine.recordEvent('lessons', { user: { id: 'p2' }, value: 3 }));
  out.push(await engine.recordEvent('lessons', { user: { id: 'p1' }, value: 50 }, { idempotencyKey: 'b' }));
  const replay = (await engine.recordEvent('lessons', { user: { id: 'p1' }, value: 50 }, { idempotencyKey: 'b' })) as EventResponse;
  expect(replay.idempotentReplayed).toBe(true);
  out.push(replay);
  out.push(await engine.getUser('p1'));
  out.push(await engine.getLeaderboard('all', {}));
  out.push(await engine.recordEvents([{ metricKey: 'lessons', user: { id: 'p3' }, value: 1, idempotencyKey: 'c' }, { metricKey: 'lessons', user: { id: 'p2' }, value: 1 }]));
  return out;
}

describe.skipIf(!PG_URL)('prepared statements on pg (needs LAUREL_PG_URL)', () => {
  // One connection each: the statements prepared on it are those of the calls made through it.
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const plainPool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await pool.end();
    await plainPool.end();
  });

  async function storeOn(client: pg.Pool | pg.Client | Queryable, preparedStatements?: boolean) {
    const schema = uniq('prep');
    schemas.push(schema);
    const store = createPostgresStore({ client: client as pg.Pool, schema, ...(preparedStatements === undefined ? {} : { preparedStatements }) });
    await store.migrate();
    return { store, schema };
  }

  it('a pg Pool: the load and the commit run as named statements; with preparedStatements false, none; the same answers', async () => {
    const named = await storeOn(pool);
    const plain = await storeOn(plainPool, false);
    const a = await calls(named.store);
    const b = await calls(plain.store);
    expect(JSON.stringify(a).replaceAll(named.schema, 'S')).toBe(JSON.stringify(b).replaceAll(plain.schema, 'S'));
    const statements = await preparedOn(pool);
    expect(statements.some((s) => s.includes(`"${named.schema}".commit_batch(`))).toBe(true);
    expect(statements.some((s) => s.includes(`LEFT JOIN "${named.schema}".users u`))).toBe(true);
    // Each text once, whatever the number of calls.
    expect(new Set(statements).size).toBe(statements.length);
    expect(await preparedOn(plainPool)).toEqual([]);
  });

  it('two schemas on one pool prepare their own statements (no name is given to two texts)', async () => {
    const first = await storeOn(pool);
    const second = await storeOn(pool);
    const a = await calls(first.store);
    const b = await calls(second.store);
    expect(JSON.stringify(a).replaceAll(first.schema, 'S')).toBe(JSON.stringify(b).replaceAll(second.schema, 'S'));
    const statements = await preparedOn(pool);
    for (const s of [first.schema, second.schema]) expect(statements.filter((x) => x.includes(`"${s}".commit_batch(`))).toHaveLength(1);
  });

  it('a pg Client (one connection): named statements too', async () => {
    const conn = new pg.Client({ connectionString: PG_URL });
    await conn.connect();
    try {
      const { store, schema } = await storeOn(conn);
      await calls(store);
      expect((await preparedOn(conn)).some((s) => s.includes(`"${schema}".commit_batch(`))).toBe(true);
    } finally {
      await conn.end();
    }
  });

  it('a client that is not pg (query(text, params) only) is sent plain statements, whatever the option says', async () => {
    const texts: unknown[] = [];
    const wrapper: Queryable = {
      query: (text, params) => {
        texts.push(text);
        return plainPool.query(text, params) as never;
      },
    };
    const { store } = await storeOn(wrapper, true);
    await calls(store);
    expect(texts.length).toBeGreaterThan(5);
    expect(texts.every((t) => typeof t === 'string')).toBe(true);
  });

  it('a server that lost the prepared statements (DISCARD ALL, a pooler): the call succeeds, plain statements from then on', async () => {
    const conn = new pg.Client({ connectionString: PG_URL });
    await conn.connect();
    const single = new pg.Pool({ connectionString: PG_URL, max: 1 });
    const reference = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      for (const client of [conn, single]) {
        const { store, schema } = await storeOn(client);
        let now = Date.parse('2026-03-02T10:00:00Z');
        const engine = createEngine({ config: multiConfig, store, clock: () => new Date((now += 1000)), newId: sequentialIds() });
        await engine.recordEvent('lessons', { user: { id: 'd1' }, value: 1 }, { idempotencyKey: 'a' });
        expect((await preparedOn(client)).some((x) => x.includes(`"${schema}".commit_batch(`))).toBe(true);
        // The server forgets them; the client still takes them for prepared.
        await client.query('DEALLOCATE ALL');
        const second = await engine.recordEvent('lessons', { user: { id: 'd1' }, value: 2 }, { idempotencyKey: 'b' });
        expect(second.total).toBe(3);
        const replay = await engine.recordEvent('lessons', { user: { id: 'd1' }, value: 2 }, { idempotencyKey: 'b' });
        expect(replay.idempotentReplayed).toBe(true);
        await engine.recordEvent('lessons', { user: { id: 'd2' }, value: 5 }, { idempotencyKey: 'c' });
        expect(await preparedOn(client)).toEqual([]);
        // The same calls on a store with plain statements answer the same.
        const plain = await storeOn(reference, false);
        let now2 = Date.parse('2026-03-02T10:00:00Z');
        const engine2 = createEngine({ config: multiConfig, store: plain.store, clock: () => new Date((now2 += 1000)), newId: sequentialIds() });
        await engine2.recordEvent('lessons', { user: { id: 'd1' }, value: 1 }, { idempotencyKey: 'a' });
        await engine2.recordEvent('lessons', { user: { id: 'd1' }, value: 2 }, { idempotencyKey: 'b' });
        await engine2.recordEvent('lessons', { user: { id: 'd2' }, value: 5 }, { idempotencyKey: 'c' });
        expect(await engine.getLeaderboard('all', {})).toEqual(await engine2.getLeaderboard('all', {}));
        expect(await engine.getUser('d1')).toEqual(await engine2.getUser('d1'));
      }
    } finally {
      await conn.end();
      await single.end();
      await reference.end();
    }
  });

  it('calls stay correct under generic plans of the prepared statements', async () => {
    const conn = new pg.Client({ connectionString: PG_URL });
    await conn.connect();
    const other = new pg.Client({ connectionString: PG_URL });
    await other.connect();
    try {
      await conn.query('SET plan_cache_mode = force_generic_plan');
      const named = await storeOn(conn);
      const plain = await storeOn(other, false);
      const a = await calls(named.store);
      const b = await calls(plain.store);
      expect(JSON.stringify(a).replaceAll(named.schema, 'S')).toBe(JSON.stringify(b).replaceAll(plain.schema, 'S'));
    } finally {
      await conn.end();
      await other.end();
    }
  });
});

describe('preparedStatements option', () => {
  it('is a boolean: anything else is a ValidationError', () => {
    const client: Queryable = { query: async () => ({ rows: [] }) };
    for (const bad of ['yes', 1, null]) {
      try {
        createPostgresStore({ client, preparedStatements: bad as never });
        expect.unreachable();
      } catch (error) {
        expect(isLaurelErrorCode(error, 'VALIDATION')).toBe(true);
      }
    }
    expect(() => createPostgresStore({ client, preparedStatements: false })).not.toThrow();
  });
});
