-- Laurel schema, version 12. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- An erasure takes the user out of what board runs announced (docs/rules.md, section 13: nothing of the user is
-- kept, not even their id): erase_user as in migration 011, and the user's entries in the rankings of
-- leaderboard.started, .finished and .changed events (change events of no user) and the marks of
-- leaderboard.changed that name the user (their values list the rankings last sent) go too. A reset keeps them
-- (the user goes on under the same id). The partial index finds the events of no user without a scan.
CREATE INDEX IF NOT EXISTS outbox_no_user ON "{{schema}}".outbox (tenant) WHERE user_id IS NULL;

-- erase_user(e, token, sql_ranks, tenant_id): as in migration 011, and (012) the board-run rankings and marks.
CREATE OR REPLACE FUNCTION "{{schema}}".erase_user(e jsonb, token text, sql_ranks boolean, tenant_id text) RETURNS jsonb
  LANGUAGE plpgsql
  AS $fn$
DECLARE
  uid text := e->>'userId';
  expected integer := (e->>'expectedVersion')::integer;
  cur integer;
  held text[];
  idxs text[];
  r jsonb;
BEGIN
  LOCK TABLE "{{schema}}".outbox IN ROW EXCLUSIVE MODE;
  SELECT version INTO cur FROM "{{schema}}".users WHERE tenant = tenant_id AND user_id = uid FOR UPDATE;
  IF coalesce(cur, 0) <> expected THEN
    RETURN '{"conflict": "version"}'::jsonb;
  END IF;
  IF cur IS NULL THEN
    RETURN '{"erased": false, "version": 0, "indexes": []}'::jsonb;
  END IF;
  SELECT coalesce(array_agg(x.idx ORDER BY x.idx), '{}') INTO held FROM "{{schema}}".entries x WHERE x.tenant = tenant_id AND x.user_id = uid;
  SELECT coalesce(array_agg(DISTINCT s.i ORDER BY s.i), '{}') INTO idxs FROM (
    SELECT h.i FROM unnest(held) AS h(i)
    UNION ALL SELECT x.idx FROM "{{schema}}".rank_history x WHERE x.tenant = tenant_id AND x.user_id = uid
    UNION ALL SELECT x.idx FROM "{{schema}}".entry_removals x WHERE x.tenant = tenant_id AND x.user_id = uid) AS s(i);
  DELETE FROM "{{schema}}".rank_history WHERE tenant = tenant_id AND user_id = uid;
  DELETE FROM "{{schema}}".ledger WHERE tenant = tenant_id AND user_id = uid;
  DELETE FROM "{{schema}}".idempotency WHERE tenant = tenant_id AND user_id = uid;
  DELETE FROM "{{schema}}".entry_removals WHERE tenant = tenant_id AND user_id = uid;
  DELETE FROM "{{schema}}".outbox WHERE tenant = tenant_id AND user_id = uid;
  IF jsonb_typeof(e->'reset') = 'object' THEN
    r := "{{schema}}".commit_batch(jsonb_build_array(jsonb_build_object(
      'userId', uid,
      'expectedVersion', expected,
      'state', e->'reset'->'state',
      'ledger', e->'reset'->'ledger',
      'leaderboard', (SELECT coalesce(jsonb_agg(jsonb_build_object('index', h.i, 'userId', uid, 'remove', true, 'unranked', true, 'date', e->>'date') ORDER BY h.i), '[]'::jsonb) FROM unnest(held) AS h(i)) || (e->'reset'->'leaderboard'),
      'counters', e->'counters',
      'idempotency', NULL,
      'changes', coalesce(e->'reset'->'changes', '[]'::jsonb),
      'due', coalesce(e->'reset'->'due', 'null'::jsonb))), token, sql_ranks, tenant_id);
    IF r->0 ? 'conflict' THEN
      RAISE EXCEPTION 'the reset of a user was refused after its version was checked' USING ERRCODE = '40001';
    END IF;
    -- (011) Every index the user was in: an external rank index keeps a marker of the reset there
    -- (withRankIndex), so a later erasure lists these indexes too and the rank index forgets the user in them.
    -- (008 took this reset's own removals out instead, and a later deletion listed none of them: the markers
    -- stayed, and refused the writes of a user created again under the id.)
    INSERT INTO "{{schema}}".entry_removals (tenant, user_id, idx)
      SELECT tenant_id, uid, i FROM unnest(idxs) AS i ORDER BY i
      ON CONFLICT DO NOTHING;
    RETURN jsonb_build_object('erased', true, 'version', expected + 1, 'indexes', to_jsonb(idxs));
  END IF;
  DELETE FROM "{{schema}}".users WHERE tenant = tenant_id AND user_id = uid;
  -- (012) The user's entries in the rankings of board-run events (the others' as they were), and the marks of
  -- leaderboard.changed that name them (the next sweep compares with nothing and sends the rankings again).
  UPDATE "{{schema}}".outbox o
    SET payload = jsonb_set(o.payload, '{leaderboard,rankings}', (
      SELECT coalesce(jsonb_agg(x.r ORDER BY x.n), '[]'::jsonb)
      FROM jsonb_array_elements(o.payload->'leaderboard'->'rankings') WITH ORDINALITY AS x(r, n)
      WHERE NOT (jsonb_typeof(x.r) = 'object' AND x.r->'userId' = to_jsonb(uid))))
    WHERE o.tenant = tenant_id AND o.user_id IS NULL
      AND o.type IN ('leaderboard.started', 'leaderboard.finished', 'leaderboard.changed')
      AND jsonb_typeof(o.payload->'leaderboard'->'rankings') = 'array'
      AND o.payload->'leaderboard'->'rankings' @> jsonb_build_array(jsonb_build_object('userId', uid));
  DELETE FROM "{{schema}}".marks
    WHERE tenant = tenant_id AND starts_with(mark, 'leaderboard.changed|') AND strpos(value, to_jsonb(uid)::text) > 0;
  WITH gone AS (DELETE FROM "{{schema}}".entries WHERE tenant = tenant_id AND user_id = uid RETURNING idx)
  INSERT INTO "{{schema}}".index_sizes (tenant, idx, n)
    SELECT tenant_id, g.idx, -count(*) FROM gone g GROUP BY g.idx ORDER BY g.idx
    ON CONFLICT (tenant, idx) DO UPDATE SET n = "{{schema}}".index_sizes.n + EXCLUDED.n;
  INSERT INTO "{{schema}}".counters (tenant, name, value)
    SELECT tenant_id, k.key, k.value::bigint FROM jsonb_each_text(e->'counters') AS k
    ORDER BY k.key COLLATE "C"
    ON CONFLICT (tenant, name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
  RETURN jsonb_build_object('erased', true, 'version', 0, 'indexes', to_jsonb(idxs));
END
$fn$;
