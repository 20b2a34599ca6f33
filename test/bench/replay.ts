/**
 * Replay at scale through the CLI: seeds N users on PostgreSQL under configuration A (test/fixtures/cli-config-a.mjs;
 * three events each, recorded with `engine.recordEvents` in batches of 1,000), then runs the built CLI
 * (`node dist/cli.js replay`, forward policy) with configuration B (cli-config-b.mjs: A plus an achievement
 * for five lessons, which half of the users already meet), first as a dry run, then for real, and reports
 * users/s and the CLI process's peak RSS for each.
 *
 *   npm run build
 *   LAUREL_PG_URL=postgres://... npx tsx test/bench/replay.ts [users]      (default 100000)
 *
 * Seeding writes board entries without SQL ranks (see seed()); the replay runs as the CLI does (SQL ranks).
 * Uses its own schema (`bench_replay_<users>`, dropped first and, unless LAUREL_BENCH_KEEP=1, at the end).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { createEngine, type BatchEvent, type LaurelConfig } from '../../src/index.js';
import { createPostgresStore } from '../../src/postgres.js';

const url = process.env.LAUREL_PG_URL;
if (!url) {
  console.error('Set LAUREL_PG_URL (e.g. postgres://postgres@127.0.0.1:55432/laurel_test)');
  process.exit(2);
}
const users = Number(process.argv[2] ?? 100_000);
if (!Number.isInteger(users) || users < 1) {
  console.error('usage: npx tsx test/bench/replay.ts [users]');
  process.exit(2);
}
const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
if (!existsSync(CLI)) {
  console.error('dist/cli.js is missing: run `npm run build` first');
  process.exit(2);
}
const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
const schema = `bench_replay_${users}`;
const EVENTS_PER_USER = 3;
const BATCH = 1000;

const pool = new pg.Pool({ connectionString: url, max: 8 });
const id = (i: number) => `user-${String(i).padStart(7, '0')}`;

async function seed() {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await createPostgresStore({ client: pool, schema }).migrate();
  // Seeded without SQL ranks: every user is on one board, and a ranked write there counts the entries ahead
  // of it (cost grows with the rank), which would make seeding quadratic. Entries are kept all the same.
  const store = createPostgresStore({ client: pool, schema, ranks: 'none' });
  const config = ((await import(pathToFileURL(fixture('cli-config-a.mjs')).href)) as { default: LaurelConfig }).default;
  const engine = createEngine({ config, store });
  const started = performance.now();
  let recorded = 0;
  // Round r records each user's r-th event: lessons 1, 2 and 0..3, so totals run 3..6 (half reach 5).
  for (let r = 0; r < EVENTS_PER_USER; r++) {
    for (let from = 0; from < users; from += BATCH) {
      const batch: BatchEvent<'lessons'>[] = [];
      for (let i = from; i < Math.min(users, from + BATCH); i++) {
        const value = r === 0 ? 1 : r === 1 ? 2 : i % 4;
        if (value > 0) batch.push({ metricKey: 'lessons', user: { id: id(i) }, value, idempotencyKey: `e${r}-${i}` });
      }
      const results = await engine.recordEvents(batch);
      const failed = results.find((x) => !x.ok);
      if (failed && !failed.ok) throw failed.error;
      recorded += batch.length;
    }
    process.stderr.write(`seeded round ${r + 1}/${EVENTS_PER_USER}: ${recorded.toLocaleString('en-US')} events, ${((recorded / (performance.now() - started)) * 1000).toFixed(0)} events/s\n`);
  }
  return { events: recorded, ms: performance.now() - started };
}

interface Outcome {
  users: number;
  changed: number;
  failed: number;
  summary: { achievementsGained: number };
  usersPerSecond: number;
  elapsedMs: number;
  peakRssBytes: number;
}

function replay(extra: string[]): Promise<{ out: Outcome; wallMs: number }> {
  const args = [CLI, 'replay', '--config', fixture('cli-config-b.mjs'), '--store', url as string, '--schema', schema, '--json', ...extra];
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_ENV: 'production' } });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`laurel replay exited ${code}: ${stdout}`));
      resolve({ out: JSON.parse(stdout) as Outcome, wallMs: performance.now() - started });
    });
  });
}

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MB`;
const row = (label: string, r: { out: Outcome; wallMs: number }) =>
  `| ${label} | ${r.out.users.toLocaleString('en-US')} | ${r.out.changed.toLocaleString('en-US')} | ${r.out.usersPerSecond.toFixed(0)} | ${(r.out.elapsedMs / 1000).toFixed(1)} s | ${(r.wallMs / 1000).toFixed(1)} s | ${mb(r.out.peakRssBytes)} |`;

try {
  const seeded = await seed();
  const dry = await replay(['--dry-run']);
  const real = await replay([]);
  const again = await replay([]);
  const expected = Math.floor(users / 4) * 2 + Math.max(0, (users % 4) - 2);
  console.log(`\nReplay of ${users.toLocaleString('en-US')} users on PostgreSQL (schema ${schema}; ${seeded.events.toLocaleString('en-US')} events seeded in ${(seeded.ms / 1000).toFixed(1)} s)`);
  console.log('| run | users | changed | users/s | replay | process wall | peak RSS |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  console.log(row('dry run (forward)', dry));
  console.log(row('forward', real));
  console.log(row('forward, again', again));
  if (real.out.changed !== expected || dry.out.changed !== expected || again.out.changed !== 0 || real.out.summary.achievementsGained !== expected) {
    console.error(`unexpected counts: expected ${expected} changed, then 0`);
    process.exitCode = 1;
  }
} finally {
  if (process.env.LAUREL_BENCH_KEEP !== '1') await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
}
