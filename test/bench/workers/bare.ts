/**
 * The bare baseline of the PostgreSQL bench: the same planned calls as record.ts (same users, values and
 * count), each committed as one upsert statement through a pg Pool, 8 in flight, after the same warm-up as
 * record.ts (see `startTogether`). Prints one JSON line.
 * argv: <schema> <calls> [<processes> <worker index>]   (the table <schema>.bare_totals must exist); with
 * several processes each sends its share of the calls, as record.ts's workers do.
 */
import pg from 'pg';
import { drive, plan, startTogether } from './shared.js';

const schema = process.argv[2] as string;
const calls = Number(process.argv[3] ?? 20_000);
const processes = Number(process.argv[4] ?? 1);
const worker = Number(process.argv[5] ?? 0);
const pool = new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 8 });
const sql = `INSERT INTO "${schema}".bare_totals AS t (user_id, total) VALUES ($1, $2) ON CONFLICT (user_id) DO UPDATE SET total = t.total + EXCLUDED.total`;
await startTogether(worker, (e) => pool.query(sql, [e.userId, e.value]));
const { event, mine } = plan(calls, processes);
const share = mine(worker);
const timing = await drive(share, 8, async (j) => {
  const e = event(j);
  await pool.query(sql, [e.userId, e.value]);
});
console.log(JSON.stringify({ worker, applied: share.length, replayed: 0, ...timing }));
await pool.end();
