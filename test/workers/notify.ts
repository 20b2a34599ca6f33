/**
 * The crash test's worker (test/changes.crash.test.ts): a process that records events and consumes the
 * change events of a named consumer against a real PostgreSQL, appending every delivered event id to a file.
 * argv: <mode: first|restart> <schema> <file>
 * - first: records 35 events (one commit each), then subscribes (batches of 10): acknowledges the first
 *   batch, and on the second prints HANG and never returns from the handler (the test kills it with SIGKILL).
 * - restart: subscribes with the same consumer until it has been handed the outbox's last event, then exits.
 */
import { appendFileSync } from 'node:fs';
import pg from 'pg';
import { createEngine, defineConfig, type StoredChange } from '../../src/index.js';
import { createPostgresStore } from '../../src/postgres.js';

const [mode, schema, file] = process.argv.slice(2) as [string, string, string];
const config = defineConfig({
  metrics: [{ key: 'lessons', name: 'Lessons' }],
  achievements: [{ key: 'first', name: 'First', trigger: 'metric', metricKey: 'lessons', metricValue: 1 }],
  pointsSystems: [{ key: 'xp', name: 'XP', triggers: [{ key: 'per-lesson', type: 'metric', metricKey: 'lessons', metricThreshold: 1, points: 10 }] }],
});
const pool = new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 4 });
const store = createPostgresStore({ client: pool, schema });
await store.migrate();
const engine = createEngine({ config, store });
const deliver = (events: StoredChange[]) => appendFileSync(file, events.map((e) => `${mode} ${e.id} ${e.position}\n`).join(''));

if (mode === 'first') {
  for (let i = 0; i < 35; i++) await engine.recordEvent('lessons', { user: { id: `u${i % 7}` }, value: 1 });
  let batches = 0;
  engine.subscribe(
    'crash',
    async (events) => {
      batches++;
      deliver(events);
      if (batches === 2) {
        process.stdout.write('HANG\n');
        await new Promise(() => undefined);
      }
    },
    { batchSize: 10, pollMs: 20, leaseMs: 1000 },
  );
} else {
  // The outbox's last event, then consume until it has been delivered.
  let last = '';
  for (let after: string | undefined; ; ) {
    const page = await engine.readChanges(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
    if (page.events.length === 0) break;
    last = (page.events[page.events.length - 1] as StoredChange).id;
    after = page.next;
  }
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const sub = engine.subscribe(
    'crash',
    (events) => {
      deliver(events);
      if (events.some((e) => e.id === last)) done();
    },
    { batchSize: 10, pollMs: 20, leaseMs: 1000 },
  );
  await finished;
  await sub.stop();
  await pool.end();
  process.stdout.write('DONE\n');
}
