/**
 * The PostgreSQL floor's rows (see floor.ts and the batch section of run.ts): what one recordEvent of the
 * bench's workload writes, at its real sizes, and one plain statement that writes those rows for any number
 * of events (of distinct users) into a migrated Laurel schema. No rules, rank counting, function or checks.
 */
import { createEngine } from '../../../src/index.js';
import { createMemoryStore } from '../../../src/memory.js';
import { multiConfig } from './shared.js';

/** The sizes of one event's rows: the state, the two ledger rows' data and the change events (a user's second event). */
export async function sampleRows() {
  const memory = createMemoryStore();
  const engine = createEngine({ config: multiConfig, store: memory });
  await engine.recordEvent('lessons', { user: { id: 'user-0', name: 'USER-0' }, value: 2 }, { idempotencyKey: 'a' });
  const before = (await memory.readChanges({ limit: 100 })).events.length;
  await engine.recordEvent('lessons', { user: { id: 'user-0', name: 'USER-0' }, value: 3 }, { idempotencyKey: 'b' });
  const changes = (await memory.readChanges({ limit: 100 })).events.slice(before);
  return {
    state: JSON.stringify((await memory.loadUser('user-0'))?.state),
    metricData: JSON.stringify((await memory.readLedger({ userId: 'user-0', kind: 'metric', key: 'lessons', order: 'desc' }))[0]?.data ?? null),
    awardData: JSON.stringify((await memory.readLedger({ userId: 'user-0', kind: 'points', key: 'xp', order: 'desc' }))[0]?.data ?? null),
    payloads: JSON.stringify(changes.map((c) => ({ type: c.type, payload: c.payload }))),
    changes: changes.length,
  };
}

/**
 * The statement writing the rows of events $1 (user ids, distinct), $2 (ids), $4 (values), $5 (totals), $6
 * (idempotency keys), all at $3, with $7..$10 the sample's state, ledger data and change events: the state
 * upsert, two ledger rows, the idempotency record, four index entries (the board and three yearly indexes),
 * a rank history row and the change events per event.
 */
export function floorStatement(schema: string): string {
  const t = (name: string) => `"${schema}".${name}`;
  return `WITH ev AS (
    SELECT * FROM unnest($1::text[], $2::text[], $4::float8[], $5::float8[], $6::text[]) AS e(user_id, id, value, total, key)
  ), u AS (
    INSERT INTO ${t('users')} (tenant, user_id, version, state, commit_id) SELECT '', user_id, 1, $7::jsonb, id FROM ev
    ON CONFLICT (tenant, user_id) DO UPDATE SET version = ${t('users')}.version + 1, state = EXCLUDED.state, commit_id = EXCLUDED.commit_id RETURNING 1
  ), l AS (
    INSERT INTO ${t('ledger')} (tenant, id, user_id, kind, key, at, delta, total, data)
    SELECT '', id || 'm', user_id, 'metric', 'lessons', $3, value, total, $8::jsonb FROM ev
    UNION ALL SELECT '', id || 'p', user_id, 'points', 'xp', $3, value * 10, total * 10, $9::jsonb FROM ev RETURNING 1
  ), i AS (
    INSERT INTO ${t('idempotency')} (tenant, user_id, metric_key, key, event_id, at) SELECT '', user_id, 'lessons', key, id, $3 FROM ev ON CONFLICT DO NOTHING RETURNING 1
  ), e AS (
    INSERT INTO ${t('entries')} (tenant, idx, user_id, value, neg_value, reached_at)
    SELECT '', x, user_id, total, -total, $3 FROM ev, unnest(ARRAY['lb|all|2020-01-01|', 'wy|m|lessons|2026', 'wy|p|xp|2026', 'wy|s|2026']) AS x
    ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at RETURNING 1
  ), h AS (
    INSERT INTO ${t('rank_history')} (tenant, idx, user_id, date, previous_rank, rank, previous_value, value)
    SELECT '', 'lb|all|2020-01-01|', user_id, '2026-11-27', 1, 1, total, total FROM ev
    ON CONFLICT (tenant, idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value RETURNING 1
  ), o AS (
    INSERT INTO ${t('outbox')} (tenant, id, type, user_id, at, payload)
    SELECT '', ev.id || '/' || x.i, x.ev->>'type', ev.user_id, $3, x.ev->'payload' FROM ev, jsonb_array_elements($10::jsonb) WITH ORDINALITY AS x(ev, i) RETURNING 1
  )
  SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM l) + (SELECT count(*) FROM i) + (SELECT count(*) FROM e) + (SELECT count(*) FROM h) + (SELECT count(*) FROM o) AS n`;
}
