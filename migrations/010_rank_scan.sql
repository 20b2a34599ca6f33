-- Laurel schema, version 10. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Ranks counted in one scan (issue 11): commit_batch as in migration 009, with the same rows, ranks, results and
-- change events. Nothing else changes.

-- commit_batch(commits, token, sql_ranks, tenant_id): as in migration 009, except where a ranked write counts
-- ranks. 009 counted the entries ahead of the new key and, in a second scan, those ahead of the user's previous
-- key; 010 reads the previous entry by its primary key and counts both in one scan of the order index, up to
-- the later of the two keys. The cost of a ranked write still grows with the rank, by half as much.
CREATE OR REPLACE FUNCTION "{{schema}}".commit_batch(commits jsonb, token text, sql_ranks boolean, tenant_id text) RETURNS jsonb
  LANGUAGE plpgsql
  AS $fn$
DECLARE
  c jsonb;
  ci bigint;
  uid text;
  expected integer;
  idem jsonb;
  ikey text;
  n bigint;
  used text[] := '{}';
  refused text[] := '{}';
  applied bigint[] := '{}';
  results jsonb[] := '{}';
  ranks jsonb[];
  w record;
  lw record;
  w_value double precision;
  w_remove boolean;
  prev_rank bigint;
  prev_value double precision;
  new_rank bigint;
  thr double precision;
  inserted boolean;
  sizes jsonb := '{}';
  size_now bigint;
  u16 text;
  lt_prev boolean;
  o_neg double precision;
  -- "C" like the columns they are read from, so that the row comparisons below order as the index does.
  o_at text COLLATE "C";
  o_u16 text COLLATE "C";
  -- Unranked writes without a threshold on indexes that nothing else in the batch reads or removes from:
  -- written at the end, in one statement (the last write of a user to an index wins, as one by one).
  late_keep text[];
  late_idx text[] := '{}';
  late_uid text[] := '{}';
  late_val double precision[] := '{}';
  late_at text[] := '{}';
  -- (007) The change events of the applied commits, one array per commit, in commit order.
  outbox_sets jsonb[] := '{}';
  settled jsonb;
  -- (009) One commit only: no late writes.
  one boolean := jsonb_array_length(commits) = 1;
  -- (009) The commit has rank_changed markers to settle; rk: index -> [first previous rank, last rank] of the
  -- commit user's writes.
  marks boolean;
  rk jsonb;
  ev jsonb;
  pair jsonb;
  rcap numeric;
  pr numeric;
  nr numeric;
BEGIN
  -- Before any write (so before the transaction has an id): readChanges finds outbox writers in flight by
  -- this lock, and waits only for them, not for unrelated transactions on the server.
  LOCK TABLE "{{schema}}".outbox IN ROW EXCLUSIVE MODE;
  IF NOT one THEN
    SELECT coalesce(array_agg(DISTINCT l.index), '{}') INTO late_keep
      FROM jsonb_array_elements(commits) AS x(e), jsonb_to_recordset(x.e->'leaderboard') AS l(index text, remove boolean, unranked boolean, "thresholdRank" jsonb)
      WHERE NOT coalesce(l.unranked, false) OR coalesce(l.remove, false) OR coalesce(jsonb_typeof(l."thresholdRank"), 'null') <> 'null';
  END IF;

  IF NOT one THEN
    PERFORM 1 FROM "{{schema}}".users
      WHERE tenant = tenant_id AND user_id = ANY (ARRAY(SELECT DISTINCT x->>'userId' FROM jsonb_array_elements(commits) AS x))
      ORDER BY user_id FOR UPDATE;
  END IF;

  FOR c, ci IN SELECT x.e, x.i FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i) LOOP
    uid := c->>'userId';
    expected := (c->>'expectedVersion')::integer;
    idem := CASE WHEN jsonb_typeof(c->'idempotency') = 'object' THEN c->'idempotency' END;

    -- A user's later commits were computed from the refused one: refused as well.
    IF uid = ANY (refused) THEN
      results := array_append(results, '{"conflict": "version"}'::jsonb);
      CONTINUE;
    END IF;

    IF idem IS NOT NULL THEN
      ikey := jsonb_build_array(uid, idem->>'metricKey', idem->>'key')::text;
      IF ikey = ANY (used) OR EXISTS (SELECT 1 FROM "{{schema}}".idempotency WHERE tenant = tenant_id AND user_id = uid AND metric_key = idem->>'metricKey' AND key = idem->>'key') THEN
        refused := array_append(refused, uid);
        -- A stale version is reported as such, as the version is checked first.
        IF coalesce((SELECT version FROM "{{schema}}".users WHERE tenant = tenant_id AND user_id = uid), 0) <> expected THEN
          results := array_append(results, '{"conflict": "version"}'::jsonb);
        ELSE
          results := array_append(results, '{"conflict": "idempotency"}'::jsonb);
        END IF;
        CONTINUE;
      END IF;
    END IF;

    IF expected = 0 THEN
      INSERT INTO "{{schema}}".users (tenant, user_id, version, state, commit_id, due) VALUES (tenant_id, uid, 1, c->'state', token, c->>'due') ON CONFLICT (tenant, user_id) DO NOTHING;
    ELSE
      -- (007) The due instant with the state, in the same row version: c->'due' when the key is there.
      UPDATE "{{schema}}".users SET version = version + 1, state = c->'state', commit_id = token, due = CASE WHEN c ? 'due' THEN c->>'due' ELSE due END
        WHERE tenant = tenant_id AND user_id = uid AND version = expected;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
      refused := array_append(refused, uid);
      results := array_append(results, '{"conflict": "version"}'::jsonb);
      CONTINUE;
    END IF;
    IF idem IS NOT NULL THEN
      used := array_append(used, ikey);
    END IF;
    applied := array_append(applied, ci);

    ranks := '{}';
    marks := sql_ranks AND jsonb_typeof(c->'changes') = 'array' AND c->'changes' @? '$[*].rank';
    rk := '{}';
    FOR w IN SELECT * FROM jsonb_to_recordset(c->'leaderboard') AS x(index text, "userId" text, value double precision, "reachedAt" text, date text, remove boolean, unranked boolean, "thresholdRank" jsonb) LOOP
      w_remove := coalesce(w.remove, false);
      w_value := CASE WHEN w_remove THEN NULL ELSE w.value END;
      prev_rank := NULL;
      prev_value := NULL;
      new_rank := NULL;
      thr := NULL;
      IF NOT one AND coalesce(w.unranked, false) AND NOT w_remove AND coalesce(jsonb_typeof(w."thresholdRank"), 'null') = 'null' AND NOT (w.index = ANY (late_keep)) THEN
        late_idx := array_append(late_idx, w.index);
        late_uid := array_append(late_uid, w."userId");
        late_val := array_append(late_val, w_value);
        late_at := array_append(late_at, w."reachedAt");
        ranks := array_append(ranks, '[null, null, null, null]'::jsonb);
        IF marks AND w."userId" = uid AND NOT rk ? w.index THEN
          rk := rk || jsonb_build_object(w.index, '[null, null]'::jsonb);
        ELSIF marks AND w."userId" = uid THEN
          rk := jsonb_set(rk, ARRAY[w.index, '1'], 'null'::jsonb);
        END IF;
        CONTINUE;
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND NOT w_remove THEN
        -- Previous value and rank, and the entries ahead of the new key, in one read (before the write: the
        -- user's own previous entry is taken off the count when it is ahead of the new key).
        u16 := "{{schema}}".utf16_hex(w."userId");
        -- (010) The user's previous entry by its primary key, then one scan of the order index up to the later of
        -- the previous and the new key, counting both ranks (before: one scan to each key).
        SELECT e.value, e.neg_value, e.reached_at, e.user_utf16 INTO prev_value, o_neg, o_at, o_u16
          FROM "{{schema}}".entries e WHERE e.tenant = tenant_id AND e.idx = w.index AND e.user_id = w."userId";
        IF NOT FOUND THEN
          lt_prev := false;
          SELECT count(*) + 1 INTO new_rank FROM "{{schema}}".entries x
            WHERE x.tenant = tenant_id AND x.idx = w.index AND (x.neg_value, x.reached_at, x.user_utf16) < (-w_value, w."reachedAt", u16);
        ELSE
          lt_prev := (o_neg, o_at, o_u16) < (-w_value, w."reachedAt", u16);
          IF lt_prev THEN
            SELECT count(*) FILTER (WHERE (x.neg_value, x.reached_at, x.user_utf16) < (o_neg, o_at, o_u16)) + 1, count(*) + 1 INTO prev_rank, new_rank
              FROM "{{schema}}".entries x
              WHERE x.tenant = tenant_id AND x.idx = w.index AND (x.neg_value, x.reached_at, x.user_utf16) < (-w_value, w."reachedAt", u16);
          ELSE
            SELECT count(*) + 1, count(*) FILTER (WHERE (x.neg_value, x.reached_at, x.user_utf16) < (-w_value, w."reachedAt", u16)) + 1 INTO prev_rank, new_rank
              FROM "{{schema}}".entries x
              WHERE x.tenant = tenant_id AND x.idx = w.index AND (x.neg_value, x.reached_at, x.user_utf16) < (o_neg, o_at, o_u16);
          END IF;
        END IF;
        IF coalesce(lt_prev, false) THEN
          new_rank := new_rank - 1;
        END IF;
        -- The entry and the rank history in one statement. The first write of a day keeps its previous rank
        -- and value; every write sets the current ones.
        WITH up AS (
          INSERT INTO "{{schema}}".entries (tenant, idx, user_id, value, neg_value, reached_at) VALUES (tenant_id, w.index, w."userId", w_value, -w_value, w."reachedAt")
            ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
            RETURNING xmax = 0 AS ins
        ), h AS (
          INSERT INTO "{{schema}}".rank_history (tenant, idx, user_id, date, previous_rank, rank, previous_value, value)
            VALUES (tenant_id, w.index, w."userId", w.date, prev_rank, new_rank, prev_value, w_value)
            ON CONFLICT (tenant, idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value
        )
        SELECT up.ins INTO inserted FROM up;
        IF inserted THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) + 1));
        END IF;
      ELSIF coalesce(w.unranked, false) OR NOT sql_ranks THEN
        -- Entries only: no rank counting, no history.
        IF NOT coalesce(w.unranked, false) THEN
          SELECT e.value INTO prev_value FROM "{{schema}}".entries e WHERE e.tenant = tenant_id AND e.idx = w.index AND e.user_id = w."userId";
        END IF;
      ELSE
        SELECT e.value, (SELECT count(*) FROM "{{schema}}".entries x WHERE x.tenant = e.tenant AND x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1
          INTO prev_value, prev_rank
          FROM "{{schema}}".entries e WHERE e.tenant = tenant_id AND e.idx = w.index AND e.user_id = w."userId";
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND NOT w_remove THEN
        NULL;  -- written above
      ELSIF w_remove THEN
        DELETE FROM "{{schema}}".entries WHERE tenant = tenant_id AND idx = w.index AND user_id = w."userId";
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n > 0 THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) - n));
        END IF;
        -- (005) Where the user's entry was taken out, so that an erasure lists the index for an external
        -- rank index, which remembers removals (see entry_removals).
        INSERT INTO "{{schema}}".entry_removals (tenant, user_id, idx) VALUES (tenant_id, w."userId", w.index) ON CONFLICT DO NOTHING;
      ELSE
        INSERT INTO "{{schema}}".entries (tenant, idx, user_id, value, neg_value, reached_at) VALUES (tenant_id, w.index, w."userId", w_value, -w_value, w."reachedAt")
          ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
          RETURNING xmax = 0 INTO inserted;
        IF inserted THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) + 1));
        END IF;
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND w_remove THEN
        -- A removal: no new rank. The first write of a day keeps its previous rank and value.
        INSERT INTO "{{schema}}".rank_history (tenant, idx, user_id, date, previous_rank, rank, previous_value, value)
          VALUES (tenant_id, w.index, w."userId", w.date, prev_rank, new_rank, prev_value, w_value)
          ON CONFLICT (tenant, idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value;
      END IF;
      IF sql_ranks AND jsonb_typeof(w."thresholdRank") = 'number' THEN
        IF w."thresholdRank"::numeric >= 1 THEN
          -- The index's size (as committed, plus this statement's own changes): below the rank, no scan.
          size_now := coalesce((SELECT s.n FROM "{{schema}}".index_sizes s WHERE s.tenant = tenant_id AND s.idx = w.index), 0) + coalesce((sizes->>w.index)::bigint, 0);
          IF size_now >= w."thresholdRank"::numeric THEN
            -- -neg_value is value exactly, and read from the index alone (an index-only scan where it can be).
            SELECT -e.neg_value INTO thr FROM "{{schema}}".entries e WHERE e.tenant = tenant_id AND e.idx = w.index
              ORDER BY e.neg_value, e.reached_at, e.user_utf16 OFFSET floor(w."thresholdRank"::numeric) - 1 LIMIT 1;
          END IF;
        END IF;
        thr := coalesce(thr, 0);
      END IF;
      ranks := array_append(ranks, jsonb_build_array(prev_rank, new_rank, prev_value::text, thr::text));
      IF marks AND w."userId" = uid AND NOT rk ? w.index THEN
        rk := rk || jsonb_build_object(w.index, jsonb_build_array(prev_rank, new_rank));
      ELSIF marks AND w."userId" = uid THEN
        rk := jsonb_set(rk, ARRAY[w.index, '1'], coalesce(to_jsonb(new_rank), 'null'::jsonb));
      END IF;
    END LOOP;
    results := array_append(results, jsonb_build_object('ranks', to_jsonb(ranks)));
    -- (007) The commit's change events. With SQL ranks, a leaderboard.rank_changed event with a rank marker
    -- gets previousRank from the first and rank from the last of this commit's rank changes of (its index,
    -- the user), each null above the marker's cap, and is dropped when the two are equal (settleChanges).
    IF jsonb_typeof(c->'changes') = 'array' AND jsonb_array_length(c->'changes') > 0 THEN
      IF marks THEN
        -- (009) Each marked event: previousRank from the first, rank from the last of this commit's rank
        -- changes of (its index, the user) (rk), each null above the marker's cap; dropped when the two are equal.
        settled := '[]';
        FOR ev IN SELECT x.ev FROM jsonb_array_elements(c->'changes') AS x(ev) LOOP
          IF jsonb_typeof(ev->'rank') = 'object' THEN
            pair := rk->(ev->'rank'->>'index');
            rcap := (ev->'rank'->>'cap')::numeric;
            pr := CASE WHEN (pair->>0)::numeric <= rcap THEN (pair->>0)::numeric END;
            nr := CASE WHEN (pair->>1)::numeric <= rcap THEN (pair->>1)::numeric END;
            CONTINUE WHEN pr IS NOT DISTINCT FROM nr;
            ev := (ev - 'rank') || jsonb_build_object('payload', coalesce(ev->'payload', '{}'::jsonb) || jsonb_build_object('leaderboard',
              CASE WHEN jsonb_typeof(ev->'payload'->'leaderboard') = 'object' THEN ev->'payload'->'leaderboard' ELSE '{}'::jsonb END
              || jsonb_build_object('previousRank', pr, 'rank', nr)));
          END IF;
          settled := settled || jsonb_build_array(ev);
        END LOOP;
        outbox_sets := array_append(outbox_sets, settled);
      ELSE
        outbox_sets := array_append(outbox_sets, c->'changes');
      END IF;
    END IF;
  END LOOP;

  IF cardinality(applied) > 0 THEN
    -- Ledger rows of the applied commits in one statement, in order (seq follows it).
    IF one THEN
      -- (009) The one commit (applied): its rows.
      INSERT INTO "{{schema}}".ledger (tenant, id, user_id, kind, key, at, delta, total, data)
        SELECT tenant_id, r.id, r."userId", r.kind, r.key, r.at, r.delta, r.total, r.data
        FROM ROWS FROM (jsonb_to_recordset(commits->0->'ledger') AS (id text, "userId" text, kind text, key text, at text, delta double precision, total double precision, data jsonb)) WITH ORDINALITY AS r
        ORDER BY r.ordinality;
    ELSE
      INSERT INTO "{{schema}}".ledger (tenant, id, user_id, kind, key, at, delta, total, data)
        SELECT tenant_id, r.id, r."userId", r.kind, r.key, r.at, r.delta, r.total, r.data
        FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i),
          ROWS FROM (jsonb_to_recordset(x.e->'ledger') AS (id text, "userId" text, kind text, key text, at text, delta double precision, total double precision, data jsonb)) WITH ORDINALITY AS r
        WHERE x.i = ANY (applied)
        ORDER BY x.i, r.ordinality;
    END IF;
    -- Idempotency records under their primary key. The checks above cannot miss one that another
    -- transaction wrote (it had to hold the user's row first); should one be found here anyway, the whole
    -- statement is refused as a serialization failure, which changes nothing.
    IF cardinality(used) > 0 THEN
      INSERT INTO "{{schema}}".idempotency (tenant, user_id, metric_key, key, event_id, at)
        SELECT tenant_id, x.e->>'userId', x.e->'idempotency'->>'metricKey', x.e->'idempotency'->>'key', x.e->'idempotency'->>'eventId', x.e->'idempotency'->>'at'
        FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i)
        WHERE x.i = ANY (applied) AND jsonb_typeof(x.e->'idempotency') = 'object'
        ON CONFLICT DO NOTHING;
      GET DIAGNOSTICS n = ROW_COUNT;
      IF n <> cardinality(used) THEN
        RAISE EXCEPTION 'an idempotency record of this batch was written concurrently' USING ERRCODE = '40001';
      END IF;
    END IF;
    -- The late unranked writes (see late_keep), counted into the index sizes.
    IF cardinality(late_idx) > 0 THEN
      FOR lw IN
        WITH up AS (
          INSERT INTO "{{schema}}".entries (tenant, idx, user_id, value, neg_value, reached_at)
            SELECT DISTINCT ON (l.idx, l.uid) tenant_id, l.idx, l.uid, l.val, -l.val, l.at
            FROM unnest(late_idx, late_uid, late_val, late_at) WITH ORDINALITY AS l(idx, uid, val, at, i)
            ORDER BY l.idx, l.uid, l.i DESC
            ON CONFLICT (tenant, idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
            RETURNING idx, xmax = 0 AS ins
        )
        SELECT up.idx, count(*) AS k FROM up WHERE up.ins GROUP BY up.idx
      LOOP
        sizes := jsonb_set(sizes, ARRAY[lw.idx], to_jsonb(coalesce((sizes->>lw.idx)::bigint, 0) + lw.k));
      END LOOP;
    END IF;
    -- Index sizes, locked in index order, then counters, summed per name and locked in name order.
    IF sizes <> '{}' THEN
      INSERT INTO "{{schema}}".index_sizes (tenant, idx, n)
        SELECT tenant_id, s.key, s.value::bigint FROM jsonb_each_text(sizes) AS s
        WHERE s.value::bigint <> 0
        ORDER BY s.key COLLATE "C"
        ON CONFLICT (tenant, idx) DO UPDATE SET n = "{{schema}}".index_sizes.n + EXCLUDED.n;
    END IF;
    IF NOT one THEN
      INSERT INTO "{{schema}}".counters (tenant, name, value)
        SELECT tenant_id, k.key, sum(k.value::bigint)::bigint
        FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i), jsonb_each_text(x.e->'counters') AS k
        WHERE x.i = ANY (applied)
        GROUP BY k.key
        ORDER BY k.key COLLATE "C"
        ON CONFLICT (tenant, name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
    ELSIF coalesce(commits->0->'counters', '{}'::jsonb) <> '{}'::jsonb THEN
      -- (009) The one commit's counters (none: no statement).
      INSERT INTO "{{schema}}".counters (tenant, name, value)
        SELECT tenant_id, k.key, sum(k.value::bigint)::bigint
        FROM jsonb_each_text(commits->0->'counters') AS k
        GROUP BY k.key
        ORDER BY k.key COLLATE "C"
        ON CONFLICT (tenant, name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
    END IF;
    -- (007) The change events of the applied commits, in commit order (seq follows it). An event id stored
    -- already is not stored again.
    IF one AND cardinality(outbox_sets) > 0 THEN
      -- (009) The one commit's events.
      INSERT INTO "{{schema}}".outbox (tenant, id, type, user_id, at, payload)
        SELECT tenant_id, x.ev->>'id', x.ev->>'type', x.ev->>'userId', x.ev->>'at', coalesce(x.ev->'payload', '{}'::jsonb)
        FROM jsonb_array_elements(outbox_sets[1]) WITH ORDINALITY AS x(ev, i)
        ORDER BY x.i
        ON CONFLICT (tenant, id) DO NOTHING;
    ELSIF cardinality(outbox_sets) > 0 THEN
      INSERT INTO "{{schema}}".outbox (tenant, id, type, user_id, at, payload)
        SELECT tenant_id, x.ev->>'id', x.ev->>'type', x.ev->>'userId', x.ev->>'at', coalesce(x.ev->'payload', '{}'::jsonb)
        FROM unnest(outbox_sets) WITH ORDINALITY AS s(evs, k), jsonb_array_elements(s.evs) WITH ORDINALITY AS x(ev, i)
        ORDER BY s.k, x.i
        ON CONFLICT (tenant, id) DO NOTHING;
    END IF;
  END IF;

  RETURN to_jsonb(results);
END
$fn$;
