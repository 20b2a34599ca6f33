/**
 * The `laurel` command line, run as built (`node dist/cli.js`; CI builds before it tests): help, version,
 * usage errors, and with LAUREL_PG_URL a real migrate / replay (dry run, commit, again) on PostgreSQL, a
 * Ctrl-C that stops after the current user and resumes with --after, and with LAUREL_REDIS_URL too a
 * rebuild of the Redis rank index.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, type LaurelConfig } from '../src/index.js';
import { createPostgresStore } from '../src/postgres.js';
import { createRedisRankIndex } from '../src/redis.js';
import { PG_URL, REDIS_URL, uniq } from './servers.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const built = existsSync(CLI);

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI to its end. */
function cli(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** The JSON summary of `replay --json`. */
interface ReplayJson {
  dryRun: boolean;
  complete: boolean;
  stopped: string | null;
  users: number;
  changed: number;
  failed: number;
  summary: { achievementsGained: number; achievementsLost: number; points: Record<string, number>; awardsReversed: number; awardsAdded: number; rejectedEvents: number; streaksChanged: number };
  cursor: string | null;
  resume: string | null;
  usersPerSecond: number;
  peakRssBytes: number;
}
const json = (r: Run) => JSON.parse(r.stdout) as ReplayJson;
const loadConfig = async (name: string, exportName: 'default' | 'config') => ((await import(pathToFileURL(fixture(name)).href)) as Record<string, LaurelConfig>)[exportName] as LaurelConfig;

describe.skipIf(!built)('laurel CLI (dist/cli.js)', () => {
  it('--help lists the commands and exits 0; --version prints the package version', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['replay', 'migrate', 'rebuild-ranks']) expect(help.stdout).toContain(command);
    const replayHelp = await cli(['replay', '--help']);
    expect(replayHelp.code).toBe(0);
    for (const option of ['--config', '--store', '--policy', '--dry-run', '--users', '--after', '--schema']) expect(replayHelp.stdout).toContain(option);
    for (const command of ['migrate', 'rebuild-ranks']) expect((await cli([command, '--help'])).code).toBe(0);
    const version = await cli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version);
  });

  it('usage errors exit 2 with a message on stderr', async () => {
    const cases: [string[], RegExp][] = [
      [['replay', '--store', 'postgres://localhost/x'], /--config/],
      [['replay', '--config', fixture('cli-config-a.mjs'), '--store', 'mysql://localhost/x'], /postgres:\/\//],
      [['replay', '--config', fixture('cli-config-a.mjs'), '--store', 'postgres://localhost/x', '--policy', 'sideways'], /forward, retroactive, grandfather/],
      [['replay', '--config', fixture('nope.mjs'), '--store', 'postgres://localhost/x'], /not found/],
      [['replay', '--config', fixture('cli-config-base.mjs'), '--store', 'postgres://localhost/x'], /defineConfig/],
      [['replay', '--config', fixture('cli-config-a.mjs'), '--store', 'postgres://localhost/x', '--users', 'a', '--after', 'b'], /--after/],
      [['migrate', '--store', 'postgres://localhost/x', '--schema', 'no-dashes'], /schema/],
      [['frobnicate'], /unknown command/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
  });

  describe.skipIf(!PG_URL)('on PostgreSQL (LAUREL_PG_URL)', () => {
    const url = PG_URL as string;
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    const schemas: string[] = [];
    afterAll(async () => {
      for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await pool.end();
    });

    /** A fresh, migrated schema with users recorded under configuration A: lessons per user. */
    async function seeded(lessons: Record<string, number>) {
      const schema = uniq('cli');
      schemas.push(schema);
      const migrated = await cli(['migrate', '--store', url, '--schema', schema]);
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.stdout).toContain('001_init');
      const again = await cli(['migrate', '--store', url, '--schema', schema]);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain('up to date');
      const store = createPostgresStore({ client: pool, schema });
      const a = createEngine({ config: await loadConfig('cli-config-a.mjs', 'default'), store });
      for (const [id, n] of Object.entries(lessons)) await a.recordEvent('lessons', { user: { id }, value: n });
      return { schema, store };
    }

    it('migrate, then replay: a dry run reports and commits nothing, the real run backdates, a second run changes nothing', async () => {
      const { schema, store } = await seeded({ u1: 6, u2: 5, u3: 2, u4: 1 });
      const ids = ['u1', 'u2', 'u3', 'u4'];
      const versions = async () => (await store.loadUsers(ids)).map((v) => v?.version);
      const ledgerSize = async () => Number((await pool.query(`SELECT count(*) AS n FROM "${schema}".ledger`)).rows[0].n);
      const before = { versions: await versions(), ledger: await ledgerSize() };
      const args = ['replay', '--config', fixture('cli-config-b.mjs'), '--store', url, '--schema', schema];

      // Dry run, the summary table.
      const dry = await cli([...args, '--dry-run']);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain('dry run: nothing was committed');
      expect(dry.stdout).toMatch(/users replayed\s+4\n/);
      expect(dry.stdout).toMatch(/would change\s+2\n/);
      expect(dry.stdout).toMatch(/failed\s+0\n/);
      expect(dry.stdout).toMatch(/achievements gained\s+2\n/);
      expect(dry.stdout).toMatch(/achievements lost\s+0\n/);
      expect(dry.stdout).toMatch(/points xp\s+0\n/);
      expect(dry.stdout).toMatch(/rate\s+[\d.]+ users\/s/);
      expect(dry.stdout).toMatch(/peak RSS\s+[\d.]+ MB/);
      expect(dry.stdout).not.toContain('Resume with');
      expect({ versions: await versions(), ledger: await ledgerSize() }).toEqual(before);

      // A dry run of some users, as JSON (unknown ids are skipped).
      const some = json(await cli([...args, '--dry-run', '--json', '--users', 'u2,u3,nobody']));
      expect(some).toMatchObject({ dryRun: true, complete: true, users: 2, changed: 1, failed: 0, summary: { achievementsGained: 1 } });
      expect({ versions: await versions(), ledger: await ledgerSize() }).toEqual(before);

      // The real run commits the backdated achievements.
      const real = await cli([...args, '--json']);
      expect(real.code, real.stderr).toBe(0);
      expect(json(real)).toMatchObject({ dryRun: false, complete: true, users: 4, changed: 2, failed: 0, cursor: 'u4', resume: null });
      expect(json(real).summary).toEqual({ achievementsGained: 2, achievementsLost: 0, points: { xp: 0 }, awardsReversed: 0, awardsAdded: 0, rejectedEvents: 0, streaksChanged: 0 });
      expect(json(real).usersPerSecond).toBeGreaterThan(0);
      expect(json(real).peakRssBytes).toBeGreaterThan(1e6);
      const b = createEngine({ config: await loadConfig('cli-config-b.mjs', 'config'), store });
      const five = async (id: string) => (await b.getUserAchievements(id)).some((x) => x.key === 'five');
      expect(await Promise.all(ids.map(five))).toEqual([true, true, false, false]);
      // Committed: u1 and u2 changed; u3 and u4 only took the new rule fingerprints.
      const committed = await versions();
      committed.forEach((v, i) => expect(v, ids[i]).toBeGreaterThan(before.versions[i] as number));

      // Again: nothing left to change.
      const afterReal = { versions: await versions(), ledger: await ledgerSize() };
      const second = await cli([...args, '--json']);
      expect(second.code, second.stderr).toBe(0);
      expect(json(second)).toMatchObject({ users: 4, changed: 0, failed: 0, summary: { achievementsGained: 0, achievementsLost: 0 } });
      expect({ versions: await versions(), ledger: await ledgerSize() }).toEqual(afterReal);
    });

    it('Ctrl-C stops after the current user and prints the cursor; --after resumes from it', async () => {
      const lessons = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`u${i}`, 5 + i]));
      const { schema, store } = await seeded(lessons);
      const args = ['--store', url, '--schema', schema, '--page-size', '2'];
      // This config module sends its process SIGINT while the second user's commit is in flight.
      const stopped = await cli(['replay', '--config', fixture('cli-config-b-interrupt.mjs'), ...args]);
      expect(stopped.code, stopped.stderr).toBe(130);
      expect(stopped.stdout).toContain('stopped by request');
      expect(stopped.stdout).toMatch(/changed\s+2\n/);
      expect(stopped.stdout).toContain('Resume with: --after u1');
      const b = createEngine({ config: await loadConfig('cli-config-b.mjs', 'config'), store });
      // Through the store, not the engine (a read through the engine would reconcile u2 in memory).
      const holds = async (id: string) => JSON.stringify((await store.loadUser(id))?.state).includes('five');
      expect(await Promise.all(Object.keys(lessons).map(holds))).toEqual([true, true, false, false, false, false]);

      const resumed = json(await cli(['replay', '--config', fixture('cli-config-b.mjs'), ...args, '--after', 'u1', '--json']));
      expect(resumed).toMatchObject({ complete: true, users: 4, changed: 4, failed: 0, cursor: 'u5', summary: { achievementsGained: 4 } });
      for (const id of Object.keys(lessons)) expect((await b.getUserAchievements(id)).some((x) => x.key === 'five'), id).toBe(true);
    });

    it('a user whose commit fails is reported with its error, the others are committed, and the exit code is 1', async () => {
      const { schema, store } = await seeded({ u1: 5, u2: 6, u3: 7 });
      const args = ['replay', '--store', url, '--schema', schema];
      // This config module makes the second commit (u2's) fail with a server error.
      const r = await cli([...args, '--config', fixture('cli-config-b-failing.mjs')]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toMatch(/users replayed\s+2\n/);
      expect(r.stdout).toMatch(/failed\s+1\n/);
      expect(r.stdout).toMatch(/Failed users \(1; nothing of theirs was committed\):\n {2}u2 {2}STORAGE_UNAVAILABLE: .*injected failure/);
      expect(r.stdout).toContain('Retry them with: --users u2');
      expect(r.stdout).not.toContain('Resume with');
      const holds = async (id: string) => JSON.stringify((await store.loadUser(id))?.state).includes('five');
      expect(await Promise.all(['u1', 'u2', 'u3'].map(holds))).toEqual([true, false, true]);
      const retry = json(await cli([...args, '--config', fixture('cli-config-b.mjs'), '--users', 'u2', '--json']));
      expect(retry).toMatchObject({ users: 1, changed: 1, failed: 0 });
      expect(await holds('u2')).toBe(true);
    });

    it('--tenant: replay walks that tenant only (its users counted, the others untouched)', async () => {
      const { schema, store } = await seeded({ d1: 6 });
      const acme = createEngine({ config: await loadConfig('cli-config-a.mjs', 'default'), store }).tenant('acme');
      for (const [id, n] of Object.entries({ a1: 6, a2: 5, a3: 1 })) await acme.recordEvent('lessons', { user: { id }, value: n });
      const args = ['replay', '--config', fixture('cli-config-b.mjs'), '--store', url, '--schema', schema, '--json'];
      const t = json(await cli([...args, '--tenant', 'acme']));
      expect(t).toMatchObject({ complete: true, users: 3, changed: 2, failed: 0 });
      const b = createEngine({ config: await loadConfig('cli-config-b.mjs', 'config'), store });
      const five = async (e: ReturnType<typeof createEngine>, id: string) => (await e.getUserAchievements(id)).some((x) => x.key === 'five');
      expect(await five(b.tenant('acme'), 'a1')).toBe(true);
      // The default tenant's user was not replayed (its achievement is not backdated yet).
      expect((await store.loadUser('d1'))?.version).toBe(1);
      expect(json(await cli([...args, '--dry-run']))).toMatchObject({ users: 1, changed: 1 });
      expect((await cli([...args, '--tenant', ''])).code).toBe(2);
    });

    it.skipIf(!REDIS_URL)('rebuild-ranks copies PostgreSQL entries into Redis (LAUREL_REDIS_URL)', async () => {
      const { schema, store } = await seeded({ r1: 3, r2: 7, r3: 5 });
      const prefix = `${uniq('cli-ranks')}:`;
      const redis = new Redis(REDIS_URL as string);
      try {
        const index = createRedisRankIndex({ redis, prefix });
        // A stale entry Redis holds that PostgreSQL does not: removed by the rebuild.
        await index.apply([{ index: 'lb|top|2020-01-01|', userId: 'ghost', value: 99, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]);
        const r = await cli(['rebuild-ranks', '--store', url, '--redis', REDIS_URL as string, '--schema', schema, '--prefix', prefix, '--json']);
        expect(r.code, r.stderr).toBe(0);
        const out = JSON.parse(r.stdout) as { indexes: { index: string; copied: number }[]; copied: number };
        expect(out.indexes).toContainEqual({ index: 'lb|top|2020-01-01|', copied: 3 });
        for (const { index: ix } of out.indexes) expect(await index.readRange(ix, 0, 100), ix).toEqual(await store.readRange(ix, 0, 100));
        expect((await index.readRange('lb|top|2020-01-01|', 0, 10)).map((e) => e.userId)).toEqual(['r2', 'r3', 'r1']);
        // A tenant's index: its own entries, under its own keys; the default tenant's index as it was.
        const acme = createEngine({ config: await loadConfig('cli-config-a.mjs', 'default'), store }).tenant('acme');
        await acme.recordEvent('lessons', { user: { id: 't1' }, value: 4 });
        await index.tenant!('acme').apply([{ index: 'lb|top|2020-01-01|', userId: 'ghost', value: 99, reachedAt: '2026-01-01T00:00:00.000Z', date: '2026-01-01', version: 1 }]);
        const t = await cli(['rebuild-ranks', '--store', url, '--redis', REDIS_URL as string, '--schema', schema, '--prefix', prefix, '--tenant', 'acme', '--json']);
        expect(t.code, t.stderr).toBe(0);
        const tOut = JSON.parse(t.stdout) as { tenant: string; indexes: { index: string; copied: number }[] };
        expect(tOut.tenant).toBe('acme');
        expect(tOut.indexes).toContainEqual({ index: 'lb|top|2020-01-01|', copied: 1 });
        expect((await index.tenant!('acme').readRange('lb|top|2020-01-01|', 0, 10)).map((e) => [e.userId, e.value])).toEqual([['t1', 4]]);
        expect((await index.readRange('lb|top|2020-01-01|', 0, 10)).map((e) => e.userId)).toEqual(['r2', 'r3', 'r1']);
      } finally {
        await redis.quit();
      }
    });
  });
});
