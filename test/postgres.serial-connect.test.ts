/**
 * Single-connection mode with a `connect` factory: when the connection drops while the commit statement is
 * still running on the server, the store waits until that server process is gone before it reads back
 * whether the commit landed. It used to read at once (it took the process id before the client had
 * connected, when pg.Client has none), found the old version, answered `committed: false`, and the old
 * server process then committed: a call reported as failed was applied.
 */
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { createEngine, defineConfig, isLaurelError, type LaurelError } from '../src/index.js';
import { createPostgresStore } from '../src/postgres.js';
import { PG_URL, uniq } from './servers.js';

const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }] });
const admin = PG_URL ? new pg.Pool({ connectionString: PG_URL, max: 3 }) : null;
const schema = uniq('serial_pid');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
afterAll(async () => {
  await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin?.end();
});

it.skipIf(!PG_URL)('a commit whose connection drops while it waits on the server is not reported as not committed when it then lands', { timeout: 30_000 }, async () => {
  const db = admin as pg.Pool;
  const clients: pg.Client[] = [];
  const store = createPostgresStore({
    schema,
    verifyTimeoutMs: 5_000,
    connect: () => {
      const c = new pg.Client({ connectionString: PG_URL });
      clients.push(c);
      return c;
    },
  });
  await store.migrate();
  const engine = createEngine({ config, store, retry: { attempts: 1 } });
  await engine.recordEvent('lessons', { user: { id: 'u' }, value: 1 });
  // Another transaction holds the user's row: the commit statement waits on the server.
  const locker = await db.connect();
  await locker.query('BEGIN');
  await locker.query(`SELECT 1 FROM "${schema}".users WHERE user_id = 'u' FOR UPDATE`);
  const pending = engine.recordEvent('lessons', { user: { id: 'u' }, value: 5 }).then(
    () => 'ok' as const,
    (e: unknown) => e as LaurelError,
  );
  for (let i = 0; i < 100; i++) {
    const r = await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%commit_batch%' AND query LIKE '%${schema}%'`);
    if ((r.rows[0] as { n: number }).n > 0) break;
    await sleep(50);
  }
  // The network drops (the server process keeps running the statement), then the lock goes.
  (clients.at(-1) as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  setTimeout(() => void locker.query('COMMIT').finally(() => locker.release()), 300);
  const outcome = await pending;
  await sleep(300);
  const total = Number((await db.query(`SELECT state->'metrics'->>'lessons' AS t FROM "${schema}".users WHERE user_id = 'u'`)).rows[0]?.t);
  for (const c of clients) await c.end().catch(() => undefined);
  // It landed (6): the call must say so (success) or say it cannot tell, never that nothing was committed.
  expect(total).toBe(6);
  if (outcome !== 'ok') {
    expect(isLaurelError(outcome)).toBe(true);
    expect((outcome as { committed?: unknown }).committed).not.toBe(false);
  }
});
