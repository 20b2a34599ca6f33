import { PGlite } from '@electric-sql/pglite';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemoryStore } from '../src/memory.js';
import { createPostgresStore } from '../src/postgres.js';
import { createEngine, defineConfig, ValidationError } from '../src/index.js';
import { createRedisRankIndex, rebuildRankIndex, withRankIndex } from '../src/redis.js';
import { describeStoreConformance } from '../src/testing/vitest.js';
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

describe.skipIf(!REDIS_URL)('Redis rank index specifics (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await redis?.quit();
  });

  it('ignores a late write with an older version, so racing processes never undo a newer value', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('stale')}:` });
    const w = { index: 'lb|x', userId: 'u', date: '2026-01-01' };
    await index.apply([{ ...w, value: 10, reachedAt: '2026-01-01T00:00:02.000Z', version: 3 }]);
    const late = await index.apply([{ ...w, value: 5, reachedAt: '2026-01-01T00:00:01.000Z', version: 2 }]);
    expect(late[0]).toMatchObject({ rank: 1, value: 10 });
    expect(await index.getEntry('lb|x', 'u')).toMatchObject({ value: 10, rank: 1 });
    await index.apply([{ ...w, remove: true, version: 4 }]);
    await index.apply([{ ...w, value: 7, reachedAt: '2026-01-01T00:00:03.000Z', version: 3 }]);
    expect(await index.getEntry('lb|x', 'u')).toBeNull();
  });

  it('orders and reads back instants before 1970 (the supported range starts in 1900)', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('old')}:` });
    const rows = [
      { userId: 'late', reachedAt: '1969-12-31T23:59:59.999Z' },
      { userId: 'early', reachedAt: '1900-01-02T00:00:00.000Z' },
      { userId: 'epoch', reachedAt: '1970-01-01T00:00:00.000Z' },
      { userId: 'mid', reachedAt: '1960-06-01T12:00:00.000Z' },
      { userId: 'now', reachedAt: '2026-01-01T00:00:00.000Z' },
    ];
    for (const [i, r] of rows.entries()) await index.apply([{ index: 'i', ...r, value: 5, date: r.reachedAt.slice(0, 10), version: i + 1 }]);
    const page = await index.readRange('i', 0, 10);
    expect(page.map((e) => [e.userId, e.reachedAt, e.rank])).toEqual([
      ['early', '1900-01-02T00:00:00.000Z', 1],
      ['mid', '1960-06-01T12:00:00.000Z', 2],
      ['late', '1969-12-31T23:59:59.999Z', 3],
      ['epoch', '1970-01-01T00:00:00.000Z', 4],
      ['now', '2026-01-01T00:00:00.000Z', 5],
    ]);
    expect(await index.getEntry('i', 'mid')).toMatchObject({ rank: 2, reachedAt: '1960-06-01T12:00:00.000Z' });
  });

  it('keeps unicode user ids and their code-unit order', async () => {
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('uni')}:` });
    const at = '2026-01-01T00:00:00.000Z';
    for (const [i, id] of ['é', 'a', '🙂', '用户', 'Z'].entries()) await index.apply([{ index: 'i', userId: id, value: 1, reachedAt: at, date: '2026-01-01', version: i + 1 }]);
    expect((await index.readRange('i', 0, 10)).map((e) => e.userId)).toEqual(['Z', 'a', 'é', '用户', '🙂'].sort());
  });

  it('keeps user ids that hold the script argument separator "|", newlines or look like fields, each apart', async () => {
    // apply packs a write's fields into one script argument with the user id last: such ids must not shift
    // the fields or meet each other.
    const index = createRedisRankIndex({ redis: redis as Redis, prefix: `${uniq('sep')}:` });
    const ids = ['a|b', 'a', 'a|', '|', '||1|0|x', 'line\nbreak|', '1|0|9', ''];
    const at = (s: number) => `2026-01-01T00:00:0${s}.000Z`;
    for (const [i, id] of ids.entries()) {
      const [change] = await index.apply([{ index: 'i', userId: id, value: 10 + i, reachedAt: at(1), date: '2026-01-01', version: 1, thresholdRank: 1 }]);
      expect(change).toEqual({ index: 'i', userId: id, previousRank: null, rank: 1, previousValue: null, value: 10 + i, threshold: 10 + i });
    }
    // A second write per user sees that user's own entry only; an older version of one of them is refused.
    const [again] = await index.apply([{ index: 'i', userId: 'a|b', value: 100, reachedAt: at(2), date: '2026-01-01', version: 2 }]);
    expect(again).toMatchObject({ previousRank: ids.length, rank: 1, previousValue: 10, value: 100 });
    await index.apply([{ index: 'i', userId: '|', value: 50, reachedAt: at(3), date: '2026-01-01', version: 3 }]);
    const [stale] = await index.apply([{ index: 'i', userId: '|', value: 999, reachedAt: at(4), date: '2026-01-01', version: 2 }]);
    expect(stale).toMatchObject({ previousValue: 50, value: 50, rank: 2 });
    expect((await index.readRange('i', 0, 10)).map((e) => [e.userId, e.value])).toEqual([
      ['a|b', 100],
      ['|', 50],
      ['', 17],
      ['1|0|9', 16],
      ['line\nbreak|', 15],
      ['||1|0|x', 14],
      ['a|', 12],
      ['a', 11],
    ]);
    expect(await index.readRankHistory('i', 'line\nbreak|', 5)).toEqual([{ date: '2026-01-01', previousRank: null, rank: 1, previousValue: null, value: 15 }]);
  });

  it('refuses user ids and index names with lone surrogates (Redis would keep both as U+FFFD: one key for two ids)', async () => {
    const prefix = `${uniq('lone')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix });
    const w = { index: 'i', value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 };
    const refused = [
      () => index.apply([{ ...w, userId: 'ok' }, { ...w, userId: '\uD800' }]),
      () => index.apply([{ ...w, userId: 'ok', index: 'i\uDC00' }]),
      async () => index.preview?.([{ ...w, userId: '\uDC00' }]),
      () => index.getEntry('i', '\uD800'),
      () => index.readRankHistory('i', 'x\uDC00', 5),
      () => index.erase('\uD800', ['i']),
      () => index.erase('ok', ['i', '\uDBFF']),
    ];
    for (const [i, call] of refused.entries()) await expect(call(), String(i)).rejects.toBeInstanceOf(ValidationError);
    // Nothing was written, not even the well-formed write before the bad one.
    expect(await redis?.keys(`${prefix}*`)).toEqual([]);
    // A surrogate pair is well-formed.
    await index.apply([{ ...w, userId: '\uD83D\uDE00' }]);
    expect(await index.getEntry('i', '😀')).toMatchObject({ rank: 1, value: 1 });
  });

  it('expires the keys of indexes it is told to', async () => {
    const prefix = `${uniq('ttl')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix, expireSeconds: (name) => (name.startsWith('lb|') ? 60 : name.startsWith('f|') ? 0.5 : null) });
    await index.apply([{ index: 'lb|run', userId: 'u', value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]);
    await index.apply([{ index: 'pt|xp', userId: 'u', value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]);
    expect(Number(await redis?.ttl(`${prefix}{lb|run}:z`))).toBeGreaterThan(0);
    expect(Number(await redis?.ttl(`${prefix}{pt|xp}:z`))).toBe(-1);
    // Half a second counts as one (Redis refuses a fractional EXPIRE, which failed the call after its writes).
    expect((await index.apply([{ index: 'f|x', userId: 'u', value: 1, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]))[0]).toMatchObject({ rank: 1 });
    expect(Number(await redis?.pttl(`${prefix}{f|x}:z`))).toBeGreaterThan(0);
  });
});

describe.skipIf(!REDIS_URL)('rebuilding the Redis index from Postgres (needs LAUREL_REDIS_URL)', () => {
  const redis = REDIS_URL ? new Redis(REDIS_URL) : null;
  const db = new PGlite();
  afterAll(async () => {
    await redis?.quit();
    await db.close();
  });

  it('restores ranks after Redis lost its data, and keeps writes that are newer than the rebuild', async () => {
    const pg = createPostgresStore({ client: db, schema: 'rebuild', ranks: 'none' });
    await pg.migrate();
    const prefix = `${uniq('rebuild')}:`;
    const index = createRedisRankIndex({ redis: redis as Redis, prefix });
    let failing = false;
    const flaky: typeof index = { ...index, apply: (w) => (failing ? Promise.reject(new Error('redis down')) : index.apply(w)) };
    const errors: unknown[] = [];
    const store = withRankIndex(pg, flaky, { onError: (e) => errors.push(e) });
    const config = defineConfig({ metrics: [{ key: 'm', name: 'M' }], leaderboards: [{ key: 'b', name: 'B', rankBy: 'metric', metricKey: 'm', start: '2020-01-01' }] });
    const engine = createEngine({ config, store });
    for (let i = 0; i < 30; i++) await engine.recordEvent('m', { user: { id: `u${i % 10}` }, value: 1 + (i % 7) });
    failing = true;
    const missed = await engine.recordEvent('m', { user: { id: 'u3' }, value: 100 });
    expect(missed.leaderboards.b).toMatchObject({ rank: null });
    expect(errors).toHaveLength(1);
    failing = false;
    const name = 'lb|b|2020-01-01|';
    const truth = await pg.readRange(name, 0, 100);
    expect((await store.readRange(name, 0, 100)).map((e) => e.userId)).not.toEqual(truth.map((e) => e.userId));
    // Redis loses everything; the rebuild brings it back from Postgres.
    const keys = await (redis as Redis).keys(`${prefix}*`);
    if (keys.length) await (redis as Redis).del(...keys);
    expect(await store.readRange(name, 0, 100)).toEqual([]);
    expect(await rebuildRankIndex(pg, index, name, { batch: 3 })).toBe(10);
    expect(await store.readRange(name, 0, 100)).toEqual(truth);
    expect((await engine.getLeaderboard('b')).rankings[0]).toMatchObject({ userId: 'u3', rank: 1 });
  });
});
