-- Laurel schema, version 5. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Operations on users (issue 13): erasure and reset (erase_user), and a user's recent metric events.
-- The indexes below are built while the tables are locked against writes: on large tables, run this
-- migration in a quiet moment.

-- eraseUser finds and deletes a user's rows by user id: the ledger (ledger_user_seq, 004) and idempotency
-- records (their primary key) are indexed by it already; entries and rank history are indexed by index first.
CREATE INDEX IF NOT EXISTS entries_user ON "{{schema}}".entries (user_id);
CREATE INDEX IF NOT EXISTS rank_history_user ON "{{schema}}".rank_history (user_id);

-- readEvents: a user's metric rows of every metric, newest first, a page before a cursor (at, key, seq). One
-- metric's rows are read on ledger_range (001). Partial: only metric rows pay for it.
CREATE INDEX IF NOT EXISTS ledger_metric_recent ON "{{schema}}".ledger (user_id, at, key, seq) WHERE kind = 'metric';

-- (user, index) pairs where a write removed the user's entry (a board group or attribute changed, a value
-- fell to 0). An external rank index (Redis) keeps, for a removed entry, a tombstone and rank history under
-- the user's id that the entries table no longer shows: erase_user lists these indexes too, so the rank
-- index can forget the user there as well. Written by commit_batch below; removals made before this
-- migration are not listed (rebuildRankIndex those indexes to be sure).
CREATE TABLE IF NOT EXISTS "{{schema}}".entry_removals (
  user_id text COLLATE "C" NOT NULL,
  idx text COLLATE "C" NOT NULL,
  PRIMARY KEY (user_id, idx)
);

-- commit_batch as in migration 003, and every removal recorded in entry_removals.
CREATE OR REPLACE FUNCTION "{{schema}}".commit_batch(commits jsonb, token text, sql_ranks boolean) RETURNS jsonb
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
  -- Unranked writes without a threshold on indexes that nothing else in the batch reads or removes from:
  -- written at the end, in one statement (the last write of a user to an index wins, as one by one).
  late_keep text[];
  late_idx text[] := '{}';
  late_uid text[] := '{}';
  late_val double precision[] := '{}';
  late_at text[] := '{}';
BEGIN
  SELECT coalesce(array_agg(DISTINCT l.index), '{}') INTO late_keep
    FROM jsonb_array_elements(commits) AS x(e), jsonb_to_recordset(x.e->'leaderboard') AS l(index text, remove boolean, unranked boolean, "thresholdRank" jsonb)
    WHERE NOT coalesce(l.unranked, false) OR coalesce(l.remove, false) OR coalesce(jsonb_typeof(l."thresholdRank"), 'null') <> 'null';

  IF jsonb_array_length(commits) > 1 THEN
    PERFORM 1 FROM "{{schema}}".users
      WHERE user_id = ANY (ARRAY(SELECT DISTINCT x->>'userId' FROM jsonb_array_elements(commits) AS x))
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
      IF ikey = ANY (used) OR EXISTS (SELECT 1 FROM "{{schema}}".idempotency WHERE user_id = uid AND metric_key = idem->>'metricKey' AND key = idem->>'key') THEN
        refused := array_append(refused, uid);
        -- A stale version is reported as such, as the version is checked first.
        IF coalesce((SELECT version FROM "{{schema}}".users WHERE user_id = uid), 0) <> expected THEN
          results := array_append(results, '{"conflict": "version"}'::jsonb);
        ELSE
          results := array_append(results, '{"conflict": "idempotency"}'::jsonb);
        END IF;
        CONTINUE;
      END IF;
    END IF;

    IF expected = 0 THEN
      INSERT INTO "{{schema}}".users (user_id, version, state, commit_id) VALUES (uid, 1, c->'state', token) ON CONFLICT (user_id) DO NOTHING;
    ELSE
      UPDATE "{{schema}}".users SET version = version + 1, state = c->'state', commit_id = token WHERE user_id = uid AND version = expected;
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
    FOR w IN SELECT * FROM jsonb_to_recordset(c->'leaderboard') AS x(index text, "userId" text, value double precision, "reachedAt" text, date text, remove boolean, unranked boolean, "thresholdRank" jsonb) LOOP
      w_remove := coalesce(w.remove, false);
      w_value := CASE WHEN w_remove THEN NULL ELSE w.value END;
      prev_rank := NULL;
      prev_value := NULL;
      new_rank := NULL;
      thr := NULL;
      IF coalesce(w.unranked, false) AND NOT w_remove AND coalesce(jsonb_typeof(w."thresholdRank"), 'null') = 'null' AND NOT (w.index = ANY (late_keep)) THEN
        late_idx := array_append(late_idx, w.index);
        late_uid := array_append(late_uid, w."userId");
        late_val := array_append(late_val, w_value);
        late_at := array_append(late_at, w."reachedAt");
        ranks := array_append(ranks, '[null, null, null, null]'::jsonb);
        CONTINUE;
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND NOT w_remove THEN
        -- Previous value and rank, and the entries ahead of the new key, in one read (before the write: the
        -- user's own previous entry is taken off the count when it is ahead of the new key).
        u16 := "{{schema}}".utf16_hex(w."userId");
        SELECT p.value, p.rank, p.lt, n.cnt + 1
          INTO prev_value, prev_rank, lt_prev, new_rank
          FROM (SELECT count(*) AS cnt FROM "{{schema}}".entries x
                  WHERE x.idx = w.index AND (x.neg_value, x.reached_at, x.user_utf16) < (-w_value, w."reachedAt", u16)) n
          LEFT JOIN LATERAL (
            SELECT e.value,
              (SELECT count(*) FROM "{{schema}}".entries x WHERE x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1 AS rank,
              (e.neg_value, e.reached_at, e.user_utf16) < (-w_value, w."reachedAt", u16) AS lt
            FROM "{{schema}}".entries e WHERE e.idx = w.index AND e.user_id = w."userId") p ON true;
        IF coalesce(lt_prev, false) THEN
          new_rank := new_rank - 1;
        END IF;
        -- The entry and the rank history in one statement. The first write of a day keeps its previous rank
        -- and value; every write sets the current ones.
        WITH up AS (
          INSERT INTO "{{schema}}".entries (idx, user_id, value, neg_value, reached_at) VALUES (w.index, w."userId", w_value, -w_value, w."reachedAt")
            ON CONFLICT (idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
            RETURNING xmax = 0 AS ins
        ), h AS (
          INSERT INTO "{{schema}}".rank_history (idx, user_id, date, previous_rank, rank, previous_value, value)
            VALUES (w.index, w."userId", w.date, prev_rank, new_rank, prev_value, w_value)
            ON CONFLICT (idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value
        )
        SELECT up.ins INTO inserted FROM up;
        IF inserted THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) + 1));
        END IF;
      ELSIF coalesce(w.unranked, false) OR NOT sql_ranks THEN
        -- Entries only: no rank counting, no history.
        IF NOT coalesce(w.unranked, false) THEN
          SELECT e.value INTO prev_value FROM "{{schema}}".entries e WHERE e.idx = w.index AND e.user_id = w."userId";
        END IF;
      ELSE
        SELECT e.value, (SELECT count(*) FROM "{{schema}}".entries x WHERE x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1
          INTO prev_value, prev_rank
          FROM "{{schema}}".entries e WHERE e.idx = w.index AND e.user_id = w."userId";
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND NOT w_remove THEN
        NULL;  -- written above
      ELSIF w_remove THEN
        DELETE FROM "{{schema}}".entries WHERE idx = w.index AND user_id = w."userId";
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n > 0 THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) - n));
        END IF;
        -- (005) Where the user's entry was taken out, so that an erasure lists the index for an external
        -- rank index, which remembers removals (see entry_removals).
        INSERT INTO "{{schema}}".entry_removals (user_id, idx) VALUES (w."userId", w.index) ON CONFLICT DO NOTHING;
      ELSE
        INSERT INTO "{{schema}}".entries (idx, user_id, value, neg_value, reached_at) VALUES (w.index, w."userId", w_value, -w_value, w."reachedAt")
          ON CONFLICT (idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
          RETURNING xmax = 0 INTO inserted;
        IF inserted THEN
          sizes := jsonb_set(sizes, ARRAY[w.index], to_jsonb(coalesce((sizes->>w.index)::bigint, 0) + 1));
        END IF;
      END IF;
      IF sql_ranks AND NOT coalesce(w.unranked, false) AND w_remove THEN
        -- A removal: no new rank. The first write of a day keeps its previous rank and value.
        INSERT INTO "{{schema}}".rank_history (idx, user_id, date, previous_rank, rank, previous_value, value)
          VALUES (w.index, w."userId", w.date, prev_rank, new_rank, prev_value, w_value)
          ON CONFLICT (idx, user_id, date) DO UPDATE SET rank = EXCLUDED.rank, value = EXCLUDED.value;
      END IF;
      IF sql_ranks AND jsonb_typeof(w."thresholdRank") = 'number' THEN
        IF w."thresholdRank"::numeric >= 1 THEN
          -- The index's size (as committed, plus this statement's own changes): below the rank, no scan.
          size_now := coalesce((SELECT s.n FROM "{{schema}}".index_sizes s WHERE s.idx = w.index), 0) + coalesce((sizes->>w.index)::bigint, 0);
          IF size_now >= w."thresholdRank"::numeric THEN
            -- -neg_value is value exactly, and read from the index alone (an index-only scan where it can be).
            SELECT -e.neg_value INTO thr FROM "{{schema}}".entries e WHERE e.idx = w.index
              ORDER BY e.neg_value, e.reached_at, e.user_utf16 OFFSET floor(w."thresholdRank"::numeric) - 1 LIMIT 1;
          END IF;
        END IF;
        thr := coalesce(thr, 0);
      END IF;
      ranks := array_append(ranks, jsonb_build_array(prev_rank, new_rank, prev_value::text, thr::text));
    END LOOP;
    results := array_append(results, jsonb_build_object('ranks', to_jsonb(ranks)));
  END LOOP;

  IF cardinality(applied) > 0 THEN
    -- Ledger rows of the applied commits in one statement, in order (seq follows it).
    INSERT INTO "{{schema}}".ledger (id, user_id, kind, key, at, delta, total, data)
      SELECT r.id, r."userId", r.kind, r.key, r.at, r.delta, r.total, r.data
      FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i),
        ROWS FROM (jsonb_to_recordset(x.e->'ledger') AS (id text, "userId" text, kind text, key text, at text, delta double precision, total double precision, data jsonb)) WITH ORDINALITY AS r
      WHERE x.i = ANY (applied)
      ORDER BY x.i, r.ordinality;
    -- Idempotency records under their primary key. The checks above cannot miss one that another
    -- transaction wrote (it had to hold the user's row first); should one be found here anyway, the whole
    -- statement is refused as a serialization failure, which changes nothing.
    IF cardinality(used) > 0 THEN
      INSERT INTO "{{schema}}".idempotency (user_id, metric_key, key, event_id, at)
        SELECT x.e->>'userId', x.e->'idempotency'->>'metricKey', x.e->'idempotency'->>'key', x.e->'idempotency'->>'eventId', x.e->'idempotency'->>'at'
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
          INSERT INTO "{{schema}}".entries (idx, user_id, value, neg_value, reached_at)
            SELECT DISTINCT ON (l.idx, l.uid) l.idx, l.uid, l.val, -l.val, l.at
            FROM unnest(late_idx, late_uid, late_val, late_at) WITH ORDINALITY AS l(idx, uid, val, at, i)
            ORDER BY l.idx, l.uid, l.i DESC
            ON CONFLICT (idx, user_id) DO UPDATE SET value = EXCLUDED.value, neg_value = EXCLUDED.neg_value, reached_at = EXCLUDED.reached_at
            RETURNING idx, xmax = 0 AS ins
        )
        SELECT up.idx, count(*) AS k FROM up WHERE up.ins GROUP BY up.idx
      LOOP
        sizes := jsonb_set(sizes, ARRAY[lw.idx], to_jsonb(coalesce((sizes->>lw.idx)::bigint, 0) + lw.k));
      END LOOP;
    END IF;
    -- Index sizes, locked in index order, then counters, summed per name and locked in name order.
    IF sizes <> '{}' THEN
      INSERT INTO "{{schema}}".index_sizes (idx, n)
        SELECT s.key, s.value::bigint FROM jsonb_each_text(sizes) AS s
        WHERE s.value::bigint <> 0
        ORDER BY s.key COLLATE "C"
        ON CONFLICT (idx) DO UPDATE SET n = "{{schema}}".index_sizes.n + EXCLUDED.n;
    END IF;
    INSERT INTO "{{schema}}".counters (name, value)
      SELECT k.key, sum(k.value::bigint)::bigint
      FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i), jsonb_each_text(x.e->'counters') AS k
      WHERE x.i = ANY (applied)
      GROUP BY k.key
      ORDER BY k.key COLLATE "C"
      ON CONFLICT (name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
  END IF;

  RETURN to_jsonb(results);
END
$fn$;

-- erase_user(e, token, sql_ranks): Store.eraseUser as one statement, so one transaction. `e` is the store's
-- Erasure as JSON, with `date` (a local date for the reset's removal writes). Refused, changing nothing, when
-- the user's version is not `expectedVersion`: {"conflict": "version"}. For an absent user (expected 0):
-- {"erased": false, ...}. Else it lists every index the user has an entry, rank history or a removed entry
-- in, deletes the user's rank history, ledger, idempotency records and removals, then either
-- - erasure: deletes the user's row and entries, adjusts the index sizes (one row per index, in index order)
--   and applies the counter increments (in name order), so locks are taken in commit_batch's order: the
--   user's row first, index sizes, then counters; or
-- - reset (`e.reset`): applies one commit_batch commit of the reset state at expectedVersion + 1 whose
--   leaderboard writes are the removal of each of the user's entries followed by the reset's own writes,
--   with the erasure's counters (commit_batch keeps the index sizes and ranks as for any commit).
-- Per-user data added in the future (boosts, outbox events of issue 13) is to be deleted here too.
-- Returns {"erased": true, "version": 0 | expectedVersion + 1, "indexes": [...]}.
CREATE OR REPLACE FUNCTION "{{schema}}".erase_user(e jsonb, token text, sql_ranks boolean) RETURNS jsonb
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
  SELECT version INTO cur FROM "{{schema}}".users WHERE user_id = uid FOR UPDATE;
  IF coalesce(cur, 0) <> expected THEN
    RETURN '{"conflict": "version"}'::jsonb;
  END IF;
  IF cur IS NULL THEN
    RETURN '{"erased": false, "version": 0, "indexes": []}'::jsonb;
  END IF;
  SELECT coalesce(array_agg(x.idx ORDER BY x.idx), '{}') INTO held FROM "{{schema}}".entries x WHERE x.user_id = uid;
  SELECT coalesce(array_agg(DISTINCT s.i ORDER BY s.i), '{}') INTO idxs FROM (
    SELECT h.i FROM unnest(held) AS h(i)
    UNION ALL SELECT x.idx FROM "{{schema}}".rank_history x WHERE x.user_id = uid
    UNION ALL SELECT x.idx FROM "{{schema}}".entry_removals x WHERE x.user_id = uid) AS s(i);
  DELETE FROM "{{schema}}".rank_history WHERE user_id = uid;
  DELETE FROM "{{schema}}".ledger WHERE user_id = uid;
  DELETE FROM "{{schema}}".idempotency WHERE user_id = uid;
  DELETE FROM "{{schema}}".entry_removals WHERE user_id = uid;
  IF jsonb_typeof(e->'reset') = 'object' THEN
    r := "{{schema}}".commit_batch(jsonb_build_array(jsonb_build_object(
      'userId', uid,
      'expectedVersion', expected,
      'state', e->'reset'->'state',
      'ledger', e->'reset'->'ledger',
      'leaderboard', (SELECT coalesce(jsonb_agg(jsonb_build_object('index', h.i, 'userId', uid, 'remove', true, 'unranked', true, 'date', e->>'date') ORDER BY h.i), '[]'::jsonb) FROM unnest(held) AS h(i)) || (e->'reset'->'leaderboard'),
      'counters', e->'counters',
      'idempotency', NULL)), token, sql_ranks);
    IF r->0 ? 'conflict' THEN
      RAISE EXCEPTION 'the reset of a user was refused after its version was checked' USING ERRCODE = '40001';
    END IF;
    -- The removals above are this reset's own, not the user's history.
    DELETE FROM "{{schema}}".entry_removals WHERE user_id = uid AND idx = ANY (held);
    RETURN jsonb_build_object('erased', true, 'version', expected + 1, 'indexes', to_jsonb(idxs));
  END IF;
  DELETE FROM "{{schema}}".users WHERE user_id = uid;
  WITH gone AS (DELETE FROM "{{schema}}".entries WHERE user_id = uid RETURNING idx)
  INSERT INTO "{{schema}}".index_sizes (idx, n)
    SELECT g.idx, -count(*) FROM gone g GROUP BY g.idx ORDER BY g.idx
    ON CONFLICT (idx) DO UPDATE SET n = "{{schema}}".index_sizes.n + EXCLUDED.n;
  INSERT INTO "{{schema}}".counters (name, value)
    SELECT k.key, k.value::bigint FROM jsonb_each_text(e->'counters') AS k
    ORDER BY k.key COLLATE "C"
    ON CONFLICT (name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
  RETURN jsonb_build_object('erased', true, 'version', 0, 'indexes', to_jsonb(idxs));
END
$fn$;
