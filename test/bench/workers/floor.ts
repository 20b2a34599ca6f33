/**
 * The floor of the PostgreSQL bench: the rows one recordEvent of the bench's workload writes (the user's state,
 * two ledger rows, the idempotency record, four index entries, a rank history row, the change events), with
 * their real sizes, written into Laurel's own tables and indexes (a migrated schema) by one plain statement
 * per call: no rules, no rank counting, no server-side function, no checks. The same planned calls as
 * record.ts (a repeated key is one read), 8 in flight, one process, after the same warm-up (see
 * `startTogether`). What the store's design costs the server before any of Laurel's work: the PostgreSQL
 * targets are measured against the bare upsert, and this says how far below it the data model alone already
 * is. Prints one JSON line.
 * argv: <schema> <calls>   (the schema must be migrated)
 */
import pg from 'pg';
import { floorStatement, sampleRows } from './floor-rows.js';
import { drive, plan, startTogether } from './shared.js';

const schema = process.argv[2] as string;
const calls = Number(process.argv[3] ?? 20_000);
const rows = await sampleRows();
const text = floorStatement(schema);
const t = (name: string) => `"${schema}".${name}`;

const pool = new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 8 });
const { event, mine } = plan(calls, 1);
const totals = new Map<string, number>();
let n = 0;
// As in record.ts, the last fifth of the calls repeat earlier keys: the engine answers those from its load
// alone, so here they are one primary-key read.
const distinct = Math.max(1, Math.round(calls * 0.8));
const replay = `SELECT event_id FROM ${t('idempotency')} WHERE tenant = '' AND user_id = $1 AND metric_key = 'lessons' AND key = $2`;
/** One call's rows. */
const write = async (e: { userId: string; key: string; value: number }) => {
  const total = (totals.get(e.userId) ?? 0) + e.value;
  totals.set(e.userId, total);
  const id = `${process.pid}-${n++}`;
  await pool.query({ name: 'laurel_bench_floor', text, values: [[e.userId], [id], new Date().toISOString(), [e.value], [total], [e.key], rows.state, rows.metricData, rows.awardData, rows.payloads] });
};
await startTogether(0, write);
const timing = await drive(mine(0), 8, async (j) => {
  const e = event(j);
  if (j >= distinct) {
    await pool.query({ name: 'laurel_bench_floor_replay', text: replay, values: [e.userId, e.key] });
    return;
  }
  await write(e);
});
console.log(JSON.stringify({ worker: 0, applied: calls, replayed: 0, ...timing, changes: rows.changes, stateBytes: rows.state.length }));
await pool.end();
