/**
 * The Redis rank index answers within a bounded time, whatever the client's own retry settings, and reports
 * every failure as a StorageUnavailableError. Fake clients pin down the deadline logic; a redis-server this
 * file spawns (and stops) checks it against ioredis with its default options.
 */
import Redis from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { isLaurelErrorCode, StorageUnavailableError, ValidationError } from '../src/errors.js';
import { createRedisRankIndex, type RankIndex, type RedisLike } from '../src/redis.js';
import { HAS_REDIS_SERVER, spawnRedis } from './redis.server.js';
import { REDIS_URL, uniq } from './servers.js';

type Outcome = { ok: true; value: unknown; ms: number } | { ok: false; error: unknown; ms: number } | { pending: true; ms: number };

/** Settles `p` or gives up after `ms` (so a hanging call fails the test instead of hanging it). */
async function settle(p: Promise<unknown>, ms = 4000): Promise<Outcome> {
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const r = await Promise.race([
      p.then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
      new Promise<{ pending: true }>((resolve) => {
        timer = setTimeout(() => resolve({ pending: true }), ms);
      }),
    ]);
    return { ...r, ms: performance.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

const W = { index: 'lb|x', userId: 'u', date: '2026-01-01' };
const write = (version: number, value = 1) => ({ ...W, value, reachedAt: '2026-01-01T00:00:00.000Z', version });

/**
 * What the apply script answers for `args` (after the script or its sha: key count, keys, argv; 3 keys per
 * write): one string, 6 `|`-separated fields per write, each write at rank 1 with value 1.
 */
const scriptReply = (args: (string | number)[]) => Array.from({ length: Number(args[1]) / 3 }, () => '|1||1|ok|').join('|');

/** Every method of a rank index, called once. */
const calls = (index: RankIndex): [string, () => Promise<unknown>][] => [
  ['apply', () => index.apply([write(1)])],
  ['getEntry', () => index.getEntry('lb|x', 'u')],
  ['readRange', () => index.readRange('lb|x', 0, 10)],
  ['countEntries', () => index.countEntries('lb|x')],
  ['countEntries(range)', () => index.countEntries('lb|x', { min: 1 })],
  ['readRankHistory', () => index.readRankHistory('lb|x', 'u', 10)],
  ['scanUsers', () => index.scanUsers('lb|x', '0', 10)],
];

function expectUnavailable(o: Outcome, label: string, maxMs: number, cause?: unknown) {
  expect('pending' in o, `${label} still pending after ${Math.round(o.ms)} ms`).toBe(false);
  expect(o, label).toMatchObject({ ok: false });
  const error = (o as { error: unknown }).error;
  expect(error, `${label}: ${String(error)}`).toBeInstanceOf(StorageUnavailableError);
  expect(isLaurelErrorCode(error, 'STORAGE_UNAVAILABLE')).toBe(true);
  expect((error as StorageUnavailableError).status).toBe(503);
  if (cause !== undefined) expect((error as Error).cause, label).toBe(cause);
  expect(o.ms, `${label} took ${Math.round(o.ms)} ms`).toBeLessThan(maxMs);
}

describe('Redis rank index: bounded time and typed failures (fake clients)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects every method with StorageUnavailableError at the deadline when the client never answers', async () => {
    const never: RedisLike = { call: () => new Promise(() => undefined) };
    const index = createRedisRankIndex({ redis: never, timeoutMs: 150 });
    for (const [label, call] of calls(index)) {
      const o = await settle(call());
      expectUnavailable(o, label, 600);
      expect(o.ms, label).toBeGreaterThanOrEqual(140);
      expect((o as { error: Error }).error.message).toMatch(/timed out after 150 ms/);
    }
  });

  it('times out exactly the calls still unanswered at their deadline, whichever calls in between were answered', async () => {
    // Calls in flight are kept in start order and each leaves that list when it settles (first, middle or
    // last); the one timer must still find every unanswered call, and serve calls started later.
    const answers = new Map<string, number>([['b', 40], ['d', 10], ['f', 60]]);
    const client: RedisLike = {
      call: (_command, ...args) => {
        const user = String(args[args.length - 1]).split('|').at(-1) as string;
        const after = answers.get(user);
        return after === undefined ? new Promise(() => undefined) : new Promise((resolve) => setTimeout(() => resolve(scriptReply(args)), after));
      },
    };
    const index = createRedisRankIndex({ redis: client, timeoutMs: 200 });
    const start = (user: string) => settle(index.apply([{ ...write(1), userId: user }]));
    const early = ['a', 'b', 'c', 'd', 'e', 'f'].map(start);
    await new Promise((r) => setTimeout(r, 120));
    const late = ['g', 'b'].map(start);
    const outcomes = await Promise.all([...early, ...late]);
    expect(outcomes.map((o) => ('pending' in o ? 'pending' : o.ok ? 'ok' : 'timeout'))).toEqual(['timeout', 'ok', 'timeout', 'ok', 'timeout', 'ok', 'timeout', 'ok']);
    for (const [i, o] of outcomes.entries()) if (!('pending' in o) && !o.ok) expectUnavailable(o, `call ${i}`, 450);
    // g started 120 ms after the others: its deadline is its own, not theirs.
    expect((outcomes[6] as Outcome).ms).toBeGreaterThanOrEqual(190);
    // Nothing is left in flight: a new call that never answers still times out, and one that answers succeeds.
    expectUnavailable(await start('h'), 'h', 450);
    expect(await start('d')).toMatchObject({ ok: true });
  });

  it('bounds calls by default (1000 ms) when no timeout is given', async () => {
    const index = createRedisRankIndex({ redis: { call: () => new Promise(() => undefined) } });
    const o = await settle(index.getEntry('lb|x', 'u'));
    expectUnavailable(o, 'getEntry', 1500);
    expect(o.ms).toBeGreaterThanOrEqual(990);
  });

  it('wraps every client error in StorageUnavailableError and keeps it as the cause', async () => {
    const boom = new Error('ECONNRESET: boom');
    const index = createRedisRankIndex({ redis: { call: () => Promise.reject(boom) } });
    for (const [label, call] of calls(index)) expectUnavailable(await settle(call()), label, 500, boom);
    const sync = createRedisRankIndex({
      redis: {
        call: () => {
          throw boom;
        },
      },
    });
    for (const [label, call] of calls(sync)) expectUnavailable(await settle(call()), `sync ${label}`, 500, boom);
  });

  it('keeps an EVALSHA -> NOSCRIPT -> EVAL fallback inside the one deadline', async () => {
    const seen: string[] = [];
    const slow: RedisLike = {
      call: (command, ...args) => {
        seen.push(command);
        return new Promise((resolve, reject) =>
          setTimeout(() => (command === 'EVALSHA' ? reject(new Error('NOSCRIPT No matching script.')) : resolve(scriptReply(args))), 250),
        );
      },
    };
    const index = createRedisRankIndex({ redis: slow, timeoutMs: 400 });
    const o = await settle(index.apply([write(1)]));
    // EVALSHA answers at 250 ms, EVAL would at 500 ms: the call must fail at 400 ms, not succeed late.
    expectUnavailable(o, 'apply', 480);
    expect(seen).toEqual(['EVALSHA', 'EVAL']);
    // And a fallback that fits in the deadline succeeds.
    const ok = await settle(createRedisRankIndex({ redis: slow, timeoutMs: 800 }).apply([write(1)]));
    expect(ok).toMatchObject({ ok: true, value: [{ rank: 1, value: 1 }] });
  });

  it('sends a whole apply as one script, writes in the order given, under one deadline', async () => {
    const sent: (string | number)[][] = [];
    let delay = 0;
    const client: RedisLike = {
      call: (command, ...args) => {
        sent.push([command, ...args]);
        return new Promise((resolve) => setTimeout(() => resolve(scriptReply(args)), delay));
      },
    };
    const index = createRedisRankIndex({ redis: client, timeoutMs: 400 });
    // Six writes to one entry, then writes to other users and indexes, one of them asking for a threshold.
    const writes = [
      ...[1, 2, 3, 4, 5, 6].map((v) => write(v, v)),
      { ...write(1, 9), userId: 'v' },
      { ...write(2, 4), index: 'pt|xp', unranked: true },
      { ...W, index: 'lb|y', remove: true as const, version: 3, thresholdRank: 10 },
    ];
    const changes = await index.apply(writes);
    expect(sent).toHaveLength(1);
    const [command, , keyCount, ...rest] = sent[0] as (string | number)[];
    expect(command).toBe('EVALSHA');
    expect(keyCount).toBe(3 * writes.length);
    const keys = rest.slice(0, 3 * writes.length);
    const argv = rest.slice(3 * writes.length);
    expect(argv).toHaveLength(writes.length);
    expect(keys.filter((_, i) => i % 3 === 0)).toEqual(writes.map((w) => `laurel:{${w.index}}:z`));
    // One packed argument per write: version, remove, member, score, value, date, ttl, ranked, threshold
    // rank, user; in the order given
    const fields = argv.map((a) => String(a).split('|'));
    expect(fields.map((f) => [f[9], f[0], f[1], f[7], f[8]])).toEqual([
      ...[1, 2, 3, 4, 5, 6].map((v) => ['u', String(v), '0', '1', '']),
      ['v', '1', '0', '1', ''],
      ['u', '2', '0', '0', ''],
      ['u', '3', '1', '1', '10'],
    ]);
    expect(changes).toHaveLength(writes.length);
    expect(changes.map((c) => [c.index, c.userId, 'threshold' in c])).toEqual(writes.map((w) => [w.index, w.userId, w.index === 'lb|y']));
    expect(changes[8]?.threshold).toBe(0);

    // One deadline for the call: a script that answers late fails the call at the deadline.
    delay = 600;
    const o = await settle(index.apply(writes));
    expectUnavailable(o, 'apply', 480);
    expect(sent).toHaveLength(2);
  });

  it('splits a very large apply into scripts of at most 1000 writes, run one after another in the order given', async () => {
    let inFlight = 0;
    let most = 0;
    const scripts: string[][] = [];
    const slow: RedisLike = {
      call: (_command, ...args) => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        const n = Number(args[1]) / 3;
        const argv = args.slice(2 + 3 * n);
        // Each write's packed argument: version first, the user id last (see SCRIPT).
        scripts.push(argv.map((a) => { const f = String(a).split('|'); return `${f.slice(9).join('|')}@${f[0]}`; }));
        return new Promise((resolve) =>
          setTimeout(() => {
            inFlight -= 1;
            resolve(scriptReply(args));
          }, 50),
        );
      },
    };
    const index = createRedisRankIndex({ redis: slow, timeoutMs: 1000 });
    const writes = Array.from({ length: 2500 }, (_, i) => ({ ...write(1, i + 1), userId: `u${i}` }));
    // Later writes to u0 and u1999 come after their first ones, whichever script they land in.
    writes.push({ ...write(2, 7), userId: 'u0' }, { ...write(2, 7), userId: 'u1999' }, { ...write(3, 8), userId: 'u0' });
    const o = await settle(index.apply(writes));
    expect(o).toMatchObject({ ok: true });
    expect((o as { value: { userId: string }[] }).value.map((c) => c.userId)).toEqual(writes.map((w) => w.userId));
    expect(scripts.map((s) => s.length)).toEqual([1000, 1000, 503]);
    expect(most).toBe(1);
    expect(scripts.flat()).toEqual(writes.map((w) => `${w.userId}@${w.version}`));
  });

  it('on a cluster client, sends one script per index (a script may touch one hash slot only), all at once', async () => {
    const scripts: string[][] = [];
    const cluster: RedisLike = {
      isCluster: true,
      call: (_command, ...args) => {
        const n = Number(args[1]) / 3;
        scripts.push(args.slice(2, 2 + 3 * n).map(String));
        return Promise.resolve(scriptReply(args));
      },
    };
    const index = createRedisRankIndex({ redis: cluster, prefix: 'p:' });
    const writes = [write(1, 1), { ...write(1, 2), index: 'lb|y' }, { ...write(1, 3), userId: 'v' }, { ...write(2, 4), index: 'lb|y' }];
    const changes = await index.apply(writes);
    expect(changes.map((c) => [c.index, c.userId])).toEqual(writes.map((w) => [w.index, w.userId]));
    expect(scripts).toHaveLength(2);
    for (const keys of scripts) expect(new Set(keys.map((k) => k.slice(0, k.indexOf('}') + 1))).size).toBe(1);
    expect(scripts.map((k) => k.filter((_, i) => i % 3 === 2))).toEqual([
      ['p:{lb|x}:r:u', 'p:{lb|x}:r:v'],
      ['p:{lb|y}:r:u', 'p:{lb|y}:r:u'],
    ]);
  });

  it('rejects a reply of the wrong shape as StorageUnavailableError', async () => {
    for (const reply of ['|1||1|ok', '|1||1|ok||', '|1||1|ok|||1||1|ok|', ['', '1', '', '1', 'ok', ''], null]) {
      const index = createRedisRankIndex({ redis: { call: async () => reply } });
      expectUnavailable(await settle(index.apply([write(1)])), `apply answered ${JSON.stringify(reply)}`, 500);
    }
  });

  it('refuses, before sending anything, a write whose date holds "|" and an expireSeconds that is no number of seconds', async () => {
    const sent: (string | number)[][] = [];
    const client: RedisLike = {
      call: (command, ...args) => {
        sent.push([command, ...args]);
        return Promise.resolve(scriptReply(args));
      },
    };
    const ok = write(1);
    const plain = createRedisRankIndex({ redis: client });
    await expect(plain.apply([ok, { ...write(2), date: '2026|01|01' }])).rejects.toBeInstanceOf(ValidationError);
    for (const bad of [Number.POSITIVE_INFINITY, 1e12 + 1, '60' as unknown as number, {} as unknown as number]) {
      const index = createRedisRankIndex({ redis: client, expireSeconds: (name) => (name === 'lb|y' ? bad : null) });
      await expect(index.apply([ok, { ...write(1), index: 'lb|y' }]), String(bad)).rejects.toBeInstanceOf(ValidationError);
    }
    expect(sent).toEqual([]);
    // null, 0, a negative number and NaN keep the keys; a fraction of a second counts as the next whole second.
    for (const [given, ttl] of [[null, '0'], [0, '0'], [-1, '0'], [Number.NaN, '0'], [Number.NEGATIVE_INFINITY, '0'], [0.2, '1'], [59.5, '60'], [1e12, '1000000000000']] as const) {
      await createRedisRankIndex({ redis: client, expireSeconds: () => given }).apply([ok]);
      expect(String(sent.at(-1)?.at(-1)).split('|')[6], String(given)).toBe(ttl);
    }
  });

  it('fails at once, without queueing a command, while an ioredis client reports that it is reconnecting', async () => {
    let sent = 0;
    const client = { status: 'reconnecting', call: () => ((sent += 1), new Promise(() => undefined)) };
    const index = createRedisRankIndex({ redis: client, timeoutMs: 1000 });
    for (const [label, call] of calls(index)) {
      const o = await settle(call());
      expectUnavailable(o, label, 50);
      expect((o as { error: Error }).error.message).toMatch(/reconnecting/);
    }
    expect(sent).toBe(0);
    let answered = 0;
    const ready = createRedisRankIndex({ redis: { status: 'ready', call: async () => ((answered += 1), null) } });
    expect(await ready.getEntry('lb|x', 'u')).toBeNull();
    expect(answered).toBe(1);
  });

  it('serves all its calls with one timer, which stops once nothing is in flight', async () => {
    vi.useFakeTimers();
    const ok = createRedisRankIndex({ redis: { call: async () => null }, timeoutMs: 1000 });
    for (let i = 0; i < 5; i++) expect(await ok.getEntry('lb|x', 'u')).toBeNull();
    const failing = createRedisRankIndex({ redis: { call: async () => Promise.reject(new Error('x')) }, timeoutMs: 1000 });
    await expect(failing.readRange('lb|x', 0, 1)).rejects.toBeInstanceOf(StorageUnavailableError);
    // One timer per index, not one per call; it fires once, finds nothing in flight and is gone.
    expect(vi.getTimerCount()).toBe(2);
    await vi.advanceTimersByTimeAsync(1000);
    expect(vi.getTimerCount()).toBe(0);

    // Calls in flight at different times each fail at their own deadline.
    const never = createRedisRankIndex({ redis: { call: () => new Promise(() => undefined) }, timeoutMs: 1000 });
    const failedAt: Record<string, number> = {};
    const t0 = Date.now();
    const track = (label: string, p: Promise<unknown>) =>
      p.catch((e: unknown) => {
        expect(e).toBeInstanceOf(StorageUnavailableError);
        failedAt[label] = Date.now() - t0;
      });
    const a = track('a', never.getEntry('lb|x', 'u'));
    await vi.advanceTimersByTimeAsync(600);
    const b = track('b', never.readRange('lb|x', 0, 1));
    await vi.advanceTimersByTimeAsync(399);
    expect(failedAt).toEqual({});
    await vi.advanceTimersByTimeAsync(2);
    expect(failedAt).toEqual({ a: 1001 });
    await vi.advanceTimersByTimeAsync(600);
    await Promise.all([a, b]);
    expect(failedAt).toEqual({ a: 1001, b: 1601 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects invalid options with a ValidationError', () => {
    const redis: RedisLike = { call: async () => null };
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, '1000' as unknown as number]) {
      expect(() => createRedisRankIndex({ redis, timeoutMs }), String(timeoutMs)).toThrow(ValidationError);
    }
    expect(() => createRedisRankIndex({ redis: null as unknown as RedisLike })).toThrow(ValidationError);
    expect(() => createRedisRankIndex(undefined as never)).toThrow(ValidationError);
  });
});

describe.skipIf(!REDIS_URL)('Redis rank index: a timed-out write that runs late (needs LAUREL_REDIS_URL)', () => {
  const real = REDIS_URL ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await real?.quit();
  });

  it('does not time out a call whose reply arrived while the event loop was blocked past the deadline', async () => {
    const index = createRedisRankIndex({ redis: real as Redis, prefix: `${uniq('stall')}:`, timeoutMs: 100 });
    await index.apply([write(1, 3)]);
    for (const call of [() => index.readRange('lb|x', 0, 10), () => index.countEntries('lb|x'), () => index.apply([write(2, 4)])]) {
      const pending = settle(call());
      const until = Date.now() + 300;
      while (Date.now() < until) {
        // A synchronous stall (GC pause, CPU-bound work): Redis answers meanwhile, unread.
      }
      expect(await pending).toMatchObject({ ok: true });
    }
    expect(await index.readRange('lb|x', 0, 10)).toMatchObject([{ userId: 'u', value: 4 }]);
  });

  it('getEntry reads the entry and its rank in one step, so a write landing in between cannot make it null', async () => {
    const redis = real as Redis;
    const prefix = `${uniq('atomic-get')}:`;
    const other = createRedisRankIndex({ redis, prefix });
    let version = 1;
    const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();
    await other.apply([{ ...W, value: 5, reachedAt: at(0), version }]);
    // After each command of getEntry, another process moves the user's entry (new reachedAt, new value).
    const racing: RedisLike = {
      call: async (command, ...args) => {
        const reply = await redis.call(command, ...args);
        version += 1;
        await other.apply([{ ...W, value: 5 + version, reachedAt: at(version), version }]);
        return reply;
      },
    };
    const index = createRedisRankIndex({ redis: racing, prefix });
    for (let i = 0; i < 3; i++) {
      const entry = await index.getEntry('lb|x', 'u');
      expect(entry).not.toBeNull();
      expect(entry?.rank).toBe(1);
      expect(entry?.value).toBe(Number(entry?.reachedAt.slice(-4, -1)) + 5);
    }
  });

  it('never undoes a newer value: writes are absolute and version-guarded', async () => {
    const redis = real as Redis;
    const prefix = `${uniq('late')}:`;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const late: Promise<unknown>[] = [];
    // Holds every command, as ioredis' offline queue holds them while Redis is away, and sends it later.
    const held: RedisLike = {
      call: (command, ...args) => {
        const p = gate.then(() => redis.call(command, ...args));
        late.push(p.catch((e: unknown) => e));
        return p;
      },
    };
    const slow = createRedisRankIndex({ redis: held, prefix, timeoutMs: 100 });
    const fast = createRedisRankIndex({ redis, prefix });
    const at = (s: number) => `2026-01-01T00:00:0${s}.000Z`;
    // Loads the script, so the late EVALSHA really runs instead of failing with NOSCRIPT.
    await fast.apply([{ ...W, value: 5, reachedAt: at(1), version: 1 }]);
    await fast.apply([{ ...W, userId: 'v', value: 9, reachedAt: at(1), version: 1 }]);

    await expect(slow.apply([{ ...W, value: 50, reachedAt: at(2), version: 2 }])).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(slow.apply([{ ...W, userId: 'v', remove: true, version: 2 }])).rejects.toBeInstanceOf(StorageUnavailableError);
    // Newer writes land while the old ones are still queued.
    await fast.apply([{ ...W, value: 7, reachedAt: at(3), version: 3 }]);
    await fast.apply([{ ...W, userId: 'v', value: 11, reachedAt: at(3), version: 3 }]);
    const before = await fast.readRange('lb|x', 0, 10);
    const historyBefore = await fast.readRankHistory('lb|x', 'u', 10);

    release();
    const replies = (await Promise.all(late)) as string[];
    // Both late scripts ran, and both were refused as stale (the fifth of a write's reply fields).
    expect(replies.map((r) => r.split('|')[4])).toEqual(['stale', 'stale']);
    expect(await fast.readRange('lb|x', 0, 10)).toEqual(before);
    expect(before.map((e) => [e.userId, e.value])).toEqual([
      ['v', 11],
      ['u', 7],
    ]);
    expect(await fast.readRankHistory('lb|x', 'u', 10)).toEqual(historyBefore);
  });
});

describe.skipIf(!HAS_REDIS_SERVER)('Redis rank index against a redis-server that goes down (needs redis-server on PATH)', () => {
  it('with default ioredis options, every call fails within the bound while Redis is down and works again once it is back', async () => {
    const server = await spawnRedis();
    const redis = new Redis(server.url);
    redis.on('error', () => undefined); // keeps ioredis from logging "Unhandled error event"
    try {
      const index = createRedisRankIndex({ redis, prefix: 'down:' });
      expect(await index.apply([write(1, 3)])).toMatchObject([{ rank: 1, value: 3 }]);
      await server.stop();
      for (let round = 0; round < 3; round++) {
        for (const [label, call] of calls(index)) expectUnavailable(await settle(call()), `${label} (round ${round})`, 1500);
      }
      await server.start();
      // Back, and empty: once ioredis has reconnected (its retry delay is at most 2 s), calls succeed.
      let outcome: Outcome = { pending: true, ms: 0 };
      const until = Date.now() + 8000;
      while (Date.now() < until) {
        outcome = await settle(index.apply([write(2, 4)]));
        if ('ok' in outcome && outcome.ok) break;
        expectUnavailable(outcome, 'apply while reconnecting', 1500);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(outcome).toMatchObject({ ok: true, value: [{ rank: 1, value: 4 }] });
      expect(await index.readRange('lb|x', 0, 10)).toMatchObject([{ userId: 'u', value: 4, rank: 1 }]);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });

  it('with default ioredis options, a frozen redis-server (connection open, nothing answers) costs a call at most the deadline', async () => {
    const server = await spawnRedis();
    const redis = new Redis(server.url);
    redis.on('error', () => undefined);
    try {
      const index = createRedisRankIndex({ redis, prefix: 'frozen:', timeoutMs: 300 });
      const at = '2026-01-01T00:00:00.000Z';
      expect(await index.apply([{ ...W, value: 3, reachedAt: at, version: 1 }])).toMatchObject([{ rank: 1, value: 3 }]);
      server.pause();
      expect(redis.status).toBe('ready');
      const frozen: [string, () => Promise<unknown>][] = [
        ['apply', () => index.apply([{ ...W, value: 50, reachedAt: at, version: 2 }])],
        ['getEntry', () => index.getEntry('lb|x', 'u')],
        ['readRange', () => index.readRange('lb|x', 0, 10)],
        ['countEntries', () => index.countEntries('lb|x', { min: 1 })],
        ['readRankHistory', () => index.readRankHistory('lb|x', 'u', 10)],
      ];
      for (const [label, call] of frozen) {
        const o = await settle(call());
        expectUnavailable(o, label, 800);
        expect(o.ms, label).toBeGreaterThanOrEqual(290);
      }
      server.resume();
      // The timed-out apply (version 2) is still in ioredis' queue and runs now; version 3 lands after it.
      expect(await index.apply([{ ...W, value: 7, reachedAt: at, version: 3 }])).toMatchObject([{ rank: 1, value: 7 }]);
      await new Promise((r) => setTimeout(r, 100));
      expect(await index.readRange('lb|x', 0, 10)).toMatchObject([{ userId: 'u', value: 7, rank: 1 }]);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
