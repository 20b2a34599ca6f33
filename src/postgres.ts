/**
 * `laurel/postgres`: the PostgreSQL store (`pg` Pool or PGlite) with its migrations.
 *
 * @module laurel/postgres
 */
export { createPostgresStore } from './postgres/store.js';
export type { PostgresClient, PostgresStore, PostgresStoreOptions, Queryable, QueryResult } from './postgres/store.js';
export { MIGRATIONS } from './postgres/migrations.js';
