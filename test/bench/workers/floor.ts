/**
 * The floor of the PostgreSQL bench: the rows one recordEvent of the bench's workload writes (the user's state,
 * two ledger rows, the idempotency record, four index entries, a rank history row, the change events), with
 * their real sizes, written into Laurel's own tables and indexes (a migrated schema) by one plain statement
 * per call: no rules, no rank counting, no server-side function, no checks. The same planned calls as
 * record.ts (a repeated key is one read), 8 in flight, one process. What the store's design costs the server before any of Laurel's work:
 * the PostgreSQL targets are measured against the bare upsert, and this says how far below it the data
 * model alone already is. Prints one JSON line.
 * argv: <schema> <calls>   (the schema must be migrated)
 */
import pg from 'pg';
import { createEngine } from '../../../src/index.js';
import { createMemoryStore } from '../../../src/memory.js';
import { drive, multiConfig, plan } from './shared.js';

const schema = process.argv[2] as string;
const calls = Number(process.argv[3] ?? 20_000);

// Real sizes: the state, ledger data and change events of this workload's second event of a user.
const memory = createMemoryStore();
const engine = createEngine({ config: multiConfig, store: memory });
await engine.recordEvent('lessons', { user: { id: 'user-0', name: 'USER-0' }, value: 2 }, { idempotencyKey: 'a' });
const before = (await memory.readChanges({ limit: 100 })).events.length;
await engine.recordEvent('lessons', { user: { id: 'user-0', name: 'USER-0' }, value: 3 }, { idempotencyKey: 'b' });
const state = JSON.stringify((await memory.loadUser('user-0'))?.state);
const metricData = JSON.stringify((await memory.readLedger({ userId: 'user-0', kind: 'metric', key: 'lessons', order: 'desc' }))[0]?.data ?? null);
const awardData = JSON.stringify((await memory.readLedger({ userId: 'user-0', kind: 'points', key: 'xp', order: 'desc' }))[0]?.data ?? null);
const changes = (await memory.readChanges({ limit: 100 })).events.slice(before);
const payloads = JSON.stringify(changes.map((c) => ({ type: c.type, payload: c.payload })));

const t = (name: string) => `"${schema}".${name}`;
const text = `WITH u AS (
    INSERT INTO ${t('users')} (tenant, user_id, version, state, commit_id) VALUES ('', $1, 1, $2::jsonb, $3)
    ON CONFLICT (tenant, user_id) DO UPDATE SET version = ${t('users')}.version + 1, state = EXCLUDED.state, commit_id = EXCLUDED.commit_id RETURNING 1
  ), l AS (
    INSERT INTO ${t('ledger')} (tenant, id, user_id, kind, key, at, delta, total, data)
    VALUES ('', $3 || 'm', $1, 'metric', 'lessons', $4, $5, $6, $7::jsonb), ('', $3 || 'p', $1, 'points', 'xp', $4, $5 * 10, $6 * 10, $8::jsonb) RETURNING 1
  ), i AS (
    INSERT INTO ${t('idempotency')} (tenant, user_id, metric_key, key, event_id, at) VALUES ('', $1, 'lessons', $9, $3, $4) ON CONFLICT DO NOTHING RETURNING 1
  ), e AS (
    INSERT INTO ${t('entries')} (tenant, idx, user_id, value, neg_value, reached_at)
    SELECT '', x, $1, $6, -$6, $4 FROM unnest(ARRAY['lb|all|2020-01-01|', 'wy|m|lessons|2026', 'wy|p|xp|2026', 'wy|s|2026']) AS x
    ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at RETURNING 1
  ), h AS (
    INSERT INTO ${t('rank_history')} (tenant, idx, user_id, date, previous_rank, rank, previous_value, value) VALUES ('', 'lb|all|2020-01-01|', $1, '2026-11-27', 1, 1, $6, $6)
    ON CONFLICT (tenant, idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value RETURNING 1
  ), o AS (
    INSERT INTO ${t('outbox')} (tenant, id, type, user_id, at, payload)
    SELECT '', $3 || '/' || x.i, x.ev->>'type', $1, $4, x.ev->'payload' FROM jsonb_array_elements($10::jsonb) WITH ORDINALITY AS x(ev, i) RETURNING 1
  )
  SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM l) + (SELECT count(*) FROM i) + (SELECT count(*) FROM e) + (SELECT count(*) FROM h) + (SELECT count(*) FROM o) AS n`;

const pool = new pg.Pool({ connectionString: process.env.LAUREL_PG_URL, max: 8 });
const { event, mine } = plan(calls, 1);
const totals = new Map<string, number>();
let n = 0;
// As in record.ts, the last fifth of the calls repeat earlier keys: the engine answers those from its load
// alone, so here they are one primary-key read.
const distinct = Math.max(1, Math.round(calls * 0.8));
const replay = `SELECT event_id FROM ${t('idempotency')} WHERE tenant = '' AND user_id = $1 AND metric_key = 'lessons' AND key = $2`;
const timing = await drive(mine(0), 8, async (j) => {
  const e = event(j);
  if (j >= distinct) {
    await pool.query({ name: 'laurel_bench_floor_replay', text: replay, values: [e.userId, e.key] });
    return;
  }
  const total = (totals.get(e.userId) ?? 0) + e.value;
  totals.set(e.userId, total);
  const id = `${process.pid}-${n++}`;
  await pool.query({ name: 'laurel_bench_floor', text, values: [e.userId, state, id, new Date().toISOString(), e.value, total, metricData, awardData, e.key, payloads] });
});
console.log(JSON.stringify({ worker: 0, applied: calls, replayed: 0, ...timing, changes: changes.length, stateBytes: state.length }));
await pool.end();
