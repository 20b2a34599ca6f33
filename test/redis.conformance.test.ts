import { PGlite } from '@electric-sql/pglite';
import Redis from 'ioredis';
import { afterAll, describe } from 'vitest';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore } from '../src/postgres.js';
import { createRedisRankIndex, withRankIndex } from '../src/redis.js';
import { describeStoreConformance } from '../src/testing/index.js';
import { REDIS_URL, uniq } from './servers.js';

describe.skipIf(!REDIS_URL)('Redis rank index (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  const db = new PGlite();
  let n = 0;
  afterAll(async () => {
    await redis?.quit();
    await db.close();
  });
  const index = () => createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('laurel-test')}:` });

  describeStoreConformance('memory store + Redis ranks', () => withRankIndex(createMemoryStore(), index()));
  describeStoreConformance('postgres (PGlite) + Redis ranks', async () => {
    const store = createPostgresStore({ client: db, schema: `redis_conf_${++n}`, ranks: 'none' });
    await store.migrate();
    return withRankIndex(store, index());
  });
});
