/**
 * `npm run bench`: throughput and latency figures for the README. Not part of `npm test`.
 * Every section prints the command-independent numbers it measured; run on an idle machine.
 */
import { Bench } from 'tinybench';
import { createEngine, defineConfig, type LaurelConfig } from '../../src/index.js';
import { createMemoryStore } from '../../src/memory.js';
import { OrderedIndex, compareEntries, type IndexEntry } from '../../src/store/ordered-index.js';
import { sequentialIds } from '../../src/testing/index.js';

const only = process.argv[2];
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

function header(title: string) {
  console.log(`\n## ${title}`);
}

/** Events/s of `fn` called `n` times in a loop (after a warm-up). */
async function rate(n: number, fn: (i: number) => unknown | Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(1000, n); i++) await fn(-1 - i);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn(i);
  return n / ((performance.now() - t0) / 1000);
}

async function foundation() {
  header('recordEvent on the memory store vs a bare-minimum loop');
  const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], attributes: [{ key: 'device', name: 'Device', type: 'event' }] });
  let now = Date.parse('2026-01-05T00:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const N = 50_000;
  const users = 1000;
  const engineRate = await rate(N, (i) => {
    now += 1000;
    return engine.recordEvent('lessons', { user: { id: `u${i % users}` }, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: `k${i}` });
  });
  // The baseline does only what any recorder must: check the key, add the value, keep the key.
  const totals = new Map<string, number>();
  const keys = new Set<string>();
  const baselineRate = await rate(N, async (i) => {
    const key = `u${i % users}|lessons|k${i}`;
    if (keys.has(key)) return;
    keys.add(key);
    totals.set(`u${i % users}`, (totals.get(`u${i % users}`) ?? 0) + 1);
  });
  console.log(`recordEvent (memory store, 1 metric, idempotency key): ${fmt(engineRate)} events/s`);
  console.log(`bare-minimum baseline loop (Map total + Set of keys):    ${fmt(baselineRate)} events/s`);
  console.log(`ratio baseline / recordEvent: ${fmt(baselineRate / engineRate, 1)}x`);
}

function richConfig(): LaurelConfig {
  const achievements = Array.from({ length: 50 }, (_, i) =>
    i % 5 === 4
      ? { key: `s${i}`, name: `Streak ${i}`, trigger: 'streak' as const, streakLength: i + 1 }
      : { key: `a${i}`, name: `Ach ${i}`, trigger: 'metric' as const, metricKey: i % 2 ? 'lessons' : 'words', metricValue: (i + 1) * 25, ...(i % 3 === 0 ? { eventAttributes: { device: 'ios' } } : {}) },
  );
  const triggers = (n: number, key: string) =>
    Array.from({ length: n }, (_, i) => ({ type: 'metric' as const, metricKey: i % 2 ? 'lessons' : 'words', metricThreshold: i + 1, points: 1 + i, ...(i % 4 === 0 ? { eventAttributes: { device: 'ios' } } : {}), id: `${key}-${i}` }));
  return defineConfig({
    metrics: [{ key: 'lessons', name: 'Lessons' }, { key: 'words', name: 'Words' }],
    attributes: [{ key: 'device', name: 'Device', type: 'event' }],
    achievements,
    streak: { frequency: 'daily', freezes: { initial: 1, max: 3, autoEarn: { everyDays: 7, amount: 1 } } },
    pointsSystems: [
      { key: 'xp', name: 'XP', triggers: triggers(10, 'xp'), levels: Array.from({ length: 10 }, (_, i) => ({ key: `l${i}`, name: `L${i}`, points: i * 100 })) },
      { key: 'coins', name: 'Coins', triggers: [...triggers(8, 'coins'), { type: 'streak', streakLengthThreshold: 3, points: 5 }, { type: 'user_creation', points: 10 }] },
      { key: 'energy', name: 'Energy', maxPoints: 10, triggers: [{ type: 'user_creation', points: 10 }, { type: 'time', timeUnit: 'hour', timeInterval: 1, points: 1 }, ...triggers(8, 'energy').map((t) => ({ ...t, points: -1, metricThreshold: 1 }))] },
    ],
    leaderboards: [
      { key: 'all', name: 'All', rankBy: 'metric', metricKey: 'lessons', start: '2020-01-01' },
      { key: 'weekly', name: 'Weekly', rankBy: 'points', pointsSystemKey: 'xp', start: '2020-01-06', runUnit: 'day', runInterval: 7 },
    ],
  });
}

async function history() {
  header('per-event cost as a user\'s history grows (50 achievements, streak with freezes, 3 points systems x 10 triggers, 2 boards)');
  const config = richConfig();
  let now = Date.parse('2020-01-06T00:00:00Z');
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  const record = (user: string, i: number) => {
    now += 20 * 60_000; // three events an hour keep the streak alive and energy flowing
    return engine.recordEvent(i % 2 ? 'lessons' : 'words', { user: { id: user }, value: 1, attributes: { device: i % 3 ? 'web' : 'ios' } });
  };
  const sample = async (user: string) => {
    const times: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const t0 = performance.now();
      await record(user, i);
      times.push(performance.now() - t0);
    }
    return median(times) * 1000;
  };
  // Warm the JIT on another user first, so the first sample is not also the slowest.
  for (let i = 0; i < 5000; i++) await record('warm-up', i);
  for (let i = 0; i < 10; i++) await record('short', i);
  const short = await sample('short');
  const t0 = performance.now();
  for (let i = 0; i < 100_000; i++) await record('long', i);
  const fill = (performance.now() - t0) / 1000;
  // The 100,000-event user and a fresh 10-event user, measured interleaved in the same heap, so that the
  // comparison isolates history from heap size and drift.
  for (let i = 0; i < 10; i++) await record('short-after', i);
  const longTimes: number[] = [];
  const shortTimes: number[] = [];
  for (let i = 0; i < 3000; i++) {
    for (const [user, times] of [['long', longTimes], ['short-after', shortTimes]] as const) {
      const s = performance.now();
      await record(user, i);
      times.push(performance.now() - s);
    }
  }
  const long = median(longTimes) * 1000;
  const shortAfter = median(shortTimes) * 1000;
  console.log(`filled a 100,000-event history in ${fmt(fill, 1)} s (${fmt(100_000 / fill)} events/s with this config)`);
  console.log(`median per-event cost, user with 10 events, before the fill:        ${fmt(short, 1)} µs`);
  console.log(`median per-event cost, user with 100,000 events (interleaved):      ${fmt(long, 1)} µs`);
  console.log(`median per-event cost, user with 10 events (interleaved with it):  ${fmt(shortAfter, 1)} µs`);
  console.log(`ratio 100,000-event user / 10-event user: ${fmt(long / shortAfter, 2)}x (flat means ~1)`);
}

async function summaries() {
  header('points event summary: 400 daily buckets for a user with 100,000 awards');
  const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 1 }] }] });
  const start = Date.parse('2024-01-01T00:00:00Z');
  let now = start;
  const engine = createEngine({ config, store: createMemoryStore(), clock: () => new Date(now), newId: sequentialIds() });
  // 100,000 awards spread over ~2.5 years: one every 13 minutes.
  for (let i = 0; i < 100_000; i++) {
    now += 13 * 60_000;
    await engine.recordEvent('lessons', { user: { id: 'heavy' }, value: 1 });
  }
  const bench = new Bench({ iterations: 50 });
  bench.add('getPointsEventSummary daily x 400', () => engine.getPointsEventSummary('heavy', 'xp', { aggregation: 'daily', startDate: '2025-01-01', endDate: '2026-02-05' }));
  bench.add('getPointsEventSummary weekly x 58', () => engine.getPointsEventSummary('heavy', 'xp', { aggregation: 'weekly', startDate: '2025-01-01', endDate: '2026-02-05' }));
  bench.add('getPointsSummary (10 awards)', () => engine.getPointsSummary('heavy', 'xp'));
  await bench.run();
  for (const task of bench.tasks) {
    const r = task.result as { latency?: { p50?: number } } | undefined;
    console.log(`${task.name}: median ${fmt(r?.latency?.p50 ?? Number.NaN, 3)} ms`);
  }
  header('recordEvent with 3 points systems of 10 triggers each (plus 50 achievements, streak, 2 boards)');
  const rich = richConfig();
  let t = Date.parse('2020-01-06T00:00:00Z');
  const e2 = createEngine({ config: rich, store: createMemoryStore(), clock: () => new Date(t), newId: sequentialIds() });
  const r = await rate(30_000, (i) => {
    t += 1000;
    return e2.recordEvent(i % 2 ? 'lessons' : 'words', { user: { id: `u${Math.abs(i) % 500}` }, value: 1, attributes: { device: i % 3 ? 'web' : 'ios' } });
  });
  console.log(`recordEvent: ${fmt(r)} events/s`);
}

function leaderboards() {
  header('leaderboard index: order-statistic treap at 1,000,000 entries vs naive sort-on-read at 100,000');
  const build = (n: number) => {
    const idx = new OrderedIndex();
    const entries = new Map<string, IndexEntry>();
    for (let i = 0; i < n; i++) {
      const e = { userId: `u${i}`, value: (i * 7919) % 100_003, reachedAt: new Date(1_700_000_000_000 + i).toISOString() };
      idx.insert(e);
      entries.set(e.userId, e);
    }
    return { idx, entries };
  };
  const { idx, entries } = build(1_000_000);
  const updates: number[] = [];
  const pages: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const id = `u${(i * 104729) % 1_000_000}`;
    const old = entries.get(id) as IndexEntry;
    const next = { userId: id, value: old.value + 1, reachedAt: new Date(1_800_000_000_000 + i).toISOString() };
    const t0 = performance.now();
    idx.remove(old);
    idx.insert(next);
    idx.rank(next);
    updates.push(performance.now() - t0);
    entries.set(id, next);
    if (i % 10 === 0) {
      const p0 = performance.now();
      idx.range(500_000, 10);
      pages.push(performance.now() - p0);
    }
  }
  const treapUpdate = median(updates) * 1000;
  const treapPage = median(pages) * 1000;
  // The naive model: an array of entries, sorted on every read.
  const naive = [...build(100_000).entries.values()];
  const nUpdates: number[] = [];
  const nPages: number[] = [];
  for (let i = 0; i < 30; i++) {
    const j = (i * 7) % naive.length;
    const t0 = performance.now();
    const e = naive[j] as IndexEntry;
    naive[j] = { ...e, value: e.value + 1 };
    naive.sort(compareEntries);
    naive.findIndex((x) => x.userId === e.userId);
    nUpdates.push(performance.now() - t0);
    const p0 = performance.now();
    naive.sort(compareEntries);
    naive.slice(50_000, 50_010);
    nPages.push(performance.now() - p0);
  }
  const naiveUpdate = median(nUpdates) * 1000;
  const naivePage = median(nPages) * 1000;
  console.log(`treap, 1,000,000 entries: update+rank median ${fmt(treapUpdate, 2)} µs; page of 10 at offset 500,000 median ${fmt(treapPage, 2)} µs`);
  console.log(`naive, 100,000 entries:   update+rank median ${fmt(naiveUpdate, 0)} µs; page of 10 at offset 50,000 median ${fmt(naivePage, 0)} µs`);
  console.log(`ratio naive(100k) / treap(1M): update+rank ${fmt(naiveUpdate / treapUpdate, 0)}x, page ${fmt(naivePage / treapPage, 0)}x`);
}

async function httpBench() {
  header('HTTP: the event route over loopback (node:http server + toNodeListener; node:http keep-alive client, 16 in flight) vs in-process');
  const http = await import('node:http');
  const { createHttpHandler, toNodeListener } = await import('../../src/http.js');
  const config = defineConfig({ metrics: [{ key: 'lessons', name: 'Lessons' }], attributes: [{ key: 'device', name: 'Device', type: 'event' }] });
  const engine = createEngine({ config, store: createMemoryStore() });
  const server = http.createServer(toNodeListener(createHttpHandler(engine, { apiKeys: ['bench'] })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const N = 20_000;
  let next = 0;
  // node:http's own client with keep-alive: lighter than fetch, so more of the 2 cores go to the server.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const send = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ user: { id: `u${i % 1000}` }, value: 1, attributes: { device: 'ios' } });
      const req = http.request(
        { host: '127.0.0.1', port, path: '/v1/metrics/lessons/event', method: 'POST', agent, headers: { 'x-api-key': 'bench', 'content-type': 'application/json', 'idempotency-key': `k${i}`, 'content-length': Buffer.byteLength(body) } },
        (res) => {
          if (res.statusCode !== 201) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.on('end', () => resolve());
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const worker = async () => {
    while (next < N) await send(next++);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 16 }, worker));
  const httpRate = N / ((performance.now() - t0) / 1000);
  server.close();
  agent.destroy();
  const inProcess = createEngine({ config, store: createMemoryStore() });
  const direct = await rate(N, (i) => inProcess.recordEvent('lessons', { user: { id: `u${Math.abs(i) % 1000}` }, value: 1, attributes: { device: 'ios' } }, { idempotencyKey: `k${i}` }));
  console.log(`HTTP event route: ${fmt(httpRate)} requests/s (client and server share this machine's 2 cores)`);
  console.log(`in-process recordEvent, same events: ${fmt(direct)} events/s`);
}

async function storage() {
  const { execFile } = await import('node:child_process');
  const { promisify } = await import('node:util');
  const run = promisify(execFile);
  const workers = async (url: string, processes: number, redisPrefix?: string) => {
    const schema = `bench_${Date.now().toString(36)}_${processes}${redisPrefix ? 'r' : ''}`;
    if (url !== 'pglite') {
      const pg = (await import('pg')).default;
      const pool = new pg.Pool({ connectionString: url });
      const { createPostgresStore } = await import('../../src/postgres.js');
      await createPostgresStore({ client: pool, schema }).migrate();
      await pool.end();
    }
    const outs = await Promise.all(
      Array.from({ length: processes }, (_, w) => run(process.execPath, ['--import', 'tsx', 'test/workers/record.ts', String(w), schema, redisPrefix ?? '-', String(processes)], { env: { ...process.env, LAUREL_PG_URL: url }, maxBuffer: 1 << 24 })),
    );
    const reports = outs.map((o) => JSON.parse(o.stdout.trim().split('\n').pop() as string) as { applied: number; replayed: number; p50: number; p99: number; seconds: number });
    const calls = reports.reduce((s, r) => s + r.applied + r.replayed, 0);
    const p50 = median(reports.map((r) => r.p50));
    const p99 = Math.max(...reports.map((r) => r.p99));
    return `${fmt(calls / Math.max(...reports.map((r) => r.seconds)))} calls/s (${calls} calls, 200 users, 20% duplicate keys, 8 in flight per process); p50 ${fmt(p50, 1)} ms, p99 ${fmt(p99, 1)} ms`;
  };
  header('recordEvent on PostgreSQL (the multi-process workload: 20,000 calls)');
  console.log(`PGlite (in-process WASM Postgres), 1 process:  ${await workers('pglite', 1)}`);
  const url = process.env.LAUREL_PG_URL;
  if (url) {
    console.log(`PostgreSQL server, 1 process:  ${await workers(url, 1)}`);
    console.log(`PostgreSQL server, 4 processes: ${await workers(url, 4)}`);
    if (process.env.LAUREL_REDIS_URL) console.log(`PostgreSQL server + Redis ranks, 4 processes: ${await workers(url, 4, `bench_${Date.now().toString(36)}:`)}`);
  } else console.log('(set LAUREL_PG_URL for the PostgreSQL server figures)');
  const redisUrl = process.env.LAUREL_REDIS_URL;
  if (!redisUrl) {
    console.log('(set LAUREL_REDIS_URL for the Redis rank-index figures)');
    return;
  }
  header('Redis rank index at 1,000,000 entries');
  const Redis = (await import('ioredis')).default;
  const { createRedisRankIndex } = await import('../../src/redis.js');
  const redis = new Redis(redisUrl);
  const prefix = `bench_${Date.now().toString(36)}:`;
  const index = createRedisRankIndex({ redis, prefix });
  const name = 'lb|bench|2026-01-01|';
  // Fill through the index itself, pipelined 2,000 writes at a time.
  const N = 1_000_000;
  const t0 = performance.now();
  for (let b = 0; b < N; b += 2000) {
    await Promise.all(Array.from({ length: 2000 }, (_, i) => index.apply([{ index: name, userId: `u${b + i}`, value: ((b + i) * 7919) % 100_003, reachedAt: new Date(1_700_000_000_000 + b + i).toISOString(), date: '2026-01-01', version: 1 }])));
  }
  console.log(`filled ${fmt(N)} entries in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  const updates: number[] = [];
  const pages: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const u = `u${(i * 104729) % N}`;
    const s = performance.now();
    await index.apply([{ index: name, userId: u, value: 200_000 + i, reachedAt: new Date(1_800_000_000_000 + i).toISOString(), date: '2026-01-02', version: 2 }]);
    updates.push(performance.now() - s);
    if (i % 5 === 0) {
      const p = performance.now();
      await index.readRange(name, 500_000, 10);
      pages.push(performance.now() - p);
    }
  }
  console.log(`update+rank (one Lua script, one round trip): median ${fmt(median(updates) * 1000, 0)} µs; page of 10 at offset 500,000: median ${fmt(median(pages) * 1000, 0)} µs`);
  let cursor = '0';
  do {
    const [next, keys] = (await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)) as [string, string[]];
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

console.log(`Laurel bench: node ${process.version}, ${new Date().toISOString().slice(0, 10)}`);
if (!only || only === 'foundation') await foundation();
if (!only || only === 'history') await history();
if (!only || only === 'points') await summaries();
if (!only || only === 'leaderboards') leaderboards();
if (!only || only === 'http') await httpBench();
if (!only || only === 'storage') await storage();
