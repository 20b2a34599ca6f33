/**
 * The stores a parity test runs on: the memory store and PostgreSQL (the real server when LAUREL_PG_URL is
 * set, as in CI, else PGlite in-process). `onEachStore(title, fn)` declares one describe block per store.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe } from 'vitest';
import type { LaurelConfig, Store } from '../src/index.js';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore, type PostgresClient } from '../src/postgres.js';
import { setupWith } from './helpers.js';
import { PG_URL, uniq } from './servers.js';

export type StoreName = 'memory' | 'postgres';

let pglite: PGlite | null = null;
let pool: pg.Pool | null = null;
let cleanup: (() => Promise<void>) | null = null;

async function postgresStore(): Promise<Store> {
  let client: PostgresClient;
  if (PG_URL) {
    pool ??= new pg.Pool({ connectionString: PG_URL, max: 4 });
    client = pool as unknown as PostgresClient;
  } else {
    pglite ??= new PGlite();
    client = pglite as unknown as PostgresClient;
  }
  const store = createPostgresStore({ client, schema: uniq('parity') });
  await store.migrate();
  return store;
}

async function closeAll() {
  await pool?.end();
  await pglite?.close();
  pool = null;
  pglite = null;
}

/** A fresh, empty store of the kind named. */
export function freshStore(kind: StoreName): Promise<Store> {
  if (!cleanup) {
    cleanup = closeAll;
    afterAll(closeAll);
  }
  return kind === 'memory' ? Promise.resolve(createMemoryStore()) : postgresStore();
}

/** An engine on a fresh store of the kind named, with a settable clock and deterministic ids. */
export async function setupOn<C extends LaurelConfig>(kind: StoreName, config: C, start = '2026-01-05T10:00:00Z') {
  return setupWith(await freshStore(kind), config, start);
}

/** One describe block per store, titled `title (memory)` and `title (postgres)`. */
export function onEachStore(title: string, fn: (kind: StoreName) => void) {
  for (const kind of ['memory', 'postgres'] as const) describe(`${title} (${kind})`, () => fn(kind));
}
