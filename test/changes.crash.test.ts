/**
 * Issue 15, crash test: a process killed (SIGKILL) between the commits and the delivery of their change
 * events loses none. After a restart, a subscriber with the same consumer name delivers every event at least
 * once, with the same id: the batch that was acknowledged before the crash is not delivered again, the batch
 * that was being handled when the process died is. Needs a PostgreSQL server (LAUREL_PG_URL): the events
 * must outlive the process.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { expect, it } from 'vitest';
import { createPostgresStore } from '../src/postgres.js';
import { PG_URL, uniq } from './servers.js';

const worker = (mode: string, schema: string, file: string) =>
  spawn(process.execPath, ['--import', 'tsx', 'test/workers/notify.ts', mode, schema, file], { env: process.env, stdio: ['ignore', 'pipe', 'inherit'] });

const waitFor = (child: ReturnType<typeof worker>, line: string) =>
  new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes(line)) resolve();
    });
    child.on('exit', (code) => (out.includes(line) ? resolve() : reject(new Error(`worker exited (${code}) before ${line}`))));
  });

it.skipIf(!PG_URL)('a process killed between commit and delivery loses no event; after a restart each is delivered at least once with the same id', { timeout: 120_000 }, async () => {
  const schema = uniq('crash');
  const file = join(mkdtempSync(join(tmpdir(), 'laurel-crash-')), 'delivered.log');
  const first = worker('first', schema, file);
  await waitFor(first, 'HANG');
  first.kill('SIGKILL');
  await new Promise((resolve) => first.on('exit', resolve));

  const restart = worker('restart', schema, file);
  await waitFor(restart, 'DONE');

  const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  try {
    const store = createPostgresStore({ client: pool, schema });
    const stored: string[] = [];
    for (let after: string | undefined; ; ) {
      const page = await store.readChanges!(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
      if (page.events.length === 0) break;
      stored.push(...page.events.map((e) => e.id));
      after = page.next;
    }
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => l.split(' ') as [string, string, string]);
    const byFirst = lines.filter((l) => l[0] === 'first').map((l) => l[1]);
    const byRestart = lines.filter((l) => l[0] === 'restart').map((l) => l[1]);
    expect(stored.length).toBeGreaterThan(35);
    // Before the crash: the acknowledged batch and the one in hand.
    expect(byFirst).toEqual(stored.slice(0, 20));
    // After it: everything from the batch in hand on, in order, with the same ids.
    expect(byRestart).toEqual(stored.slice(10));
    expect(new Set([...byFirst, ...byRestart])).toEqual(new Set(stored));
  } finally {
    await pool.end();
  }
});
