-- Laurel schema, version 7. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Change notifications (issue 15): the transactional outbox, consumer cursors with leases, marks, delivery
-- outcomes, and each user's next due instant. Needs PostgreSQL 13 or later (xid8, pg_current_xact_id).

-- Change events. commit_batch and erase_user write a commit's events in its own statement (one transaction).
-- Readers take them in (xid, seq) order, only below the oldest transaction still running
-- (pg_snapshot_xmin(pg_current_snapshot())): a row appears there only once every transaction that could add
-- a row before it has ended, so a reader's cursor ("<xid>.<seq>") never passes an event that shows up later.
CREATE TABLE IF NOT EXISTS "{{schema}}".outbox (
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  seq bigserial NOT NULL,
  id text COLLATE "C" NOT NULL UNIQUE,
  type text COLLATE "C" NOT NULL,
  user_id text COLLATE "C",
  at text COLLATE "C" NOT NULL,
  payload jsonb NOT NULL,
  PRIMARY KEY (xid, seq)
);
-- eraseUser deletes a user's events; pruneChanges the oldest by date.
CREATE INDEX IF NOT EXISTS outbox_user ON "{{schema}}".outbox (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS outbox_at ON "{{schema}}".outbox (at);

-- Durable consumers: a cursor, and the lease of the one process that reads for it (instants from the
-- engine's clock, never the server's).
CREATE TABLE IF NOT EXISTS "{{schema}}".consumers (
  name text COLLATE "C" PRIMARY KEY,
  cursor text,
  owner text,
  lease_until timestamptz
);

-- Marks: how sweeps emit a change that no user's commit causes exactly once (appendChanges).
CREATE TABLE IF NOT EXISTS "{{schema}}".marks (
  mark text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

-- Delivery outcomes, newest first per consumer (seq); pruned by date with the events (pruneChanges).
CREATE TABLE IF NOT EXISTS "{{schema}}".deliveries (
  seq bigserial PRIMARY KEY,
  consumer text COLLATE "C" NOT NULL,
  event_id text NOT NULL,
  attempt integer NOT NULL,
  ok boolean NOT NULL,
  status integer,
  error text,
  at text COLLATE "C" NOT NULL,
  ms double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_consumer ON "{{schema}}".deliveries (consumer, seq);
CREATE INDEX IF NOT EXISTS deliveries_at ON "{{schema}}".deliveries (at);

-- Each user's next due instant (ISO, as toISOString writes it: compares as instants in "C" order), for
-- claimDue (earliest first, ties by id); only users with one are indexed.
ALTER TABLE "{{schema}}".users ADD COLUMN IF NOT EXISTS due text COLLATE "C";
CREATE INDEX IF NOT EXISTS users_due ON "{{schema}}".users (due, user_id) WHERE due IS NOT NULL;

-- commit_batch as in migration 005, and for each applied commit: its change events (c->'changes') appended
-- to the outbox in order, after every commit's other writes, each leaderboard.rank_changed event with a
-- `rank` marker completed from the commit's own rank changes as settleChanges does (src/store/outbox.ts; with
-- sql_ranks false an external rank index completed them before, and the marker is ignored), and the user's
-- due instant set from c->'due' when the key is there (JSON null clears it).
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
  -- (007) The change events of the applied commits, one array per commit, in commit order.
  outbox_sets jsonb[] := '{}';
  settled jsonb;
BEGIN
  -- Before any write (so before the transaction has an id): readChanges finds outbox writers in flight by
  -- this lock, and waits only for them, not for unrelated transactions on the server.
  LOCK TABLE "{{schema}}".outbox IN ROW EXCLUSIVE MODE;
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
      INSERT INTO "{{schema}}".users (user_id, version, state, commit_id, due) VALUES (uid, 1, c->'state', token, c->>'due') ON CONFLICT (user_id) DO NOTHING;
    ELSE
      -- (007) The due instant with the state, in the same row version: c->'due' when the key is there.
      UPDATE "{{schema}}".users SET version = version + 1, state = c->'state', commit_id = token, due = CASE WHEN c ? 'due' THEN c->>'due' ELSE due END
        WHERE user_id = uid AND version = expected;
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
    -- (007) The commit's change events. With SQL ranks, a leaderboard.rank_changed event with a `rank` marker
    -- gets previousRank from the first and rank from the last of this commit's rank changes of (its index,
    -- the user), each null above the marker's cap, and is dropped when the two are equal (settleChanges).
    IF jsonb_typeof(c->'changes') = 'array' AND jsonb_array_length(c->'changes') > 0 THEN
      IF sql_ranks AND c->'changes' @? '$[*].rank' THEN
        SELECT coalesce(jsonb_agg(s.ev ORDER BY s.i), '[]'::jsonb) INTO settled FROM (
          SELECT x.i, CASE WHEN jsonb_typeof(x.ev->'rank') = 'object' THEN
              (x.ev - 'rank') || jsonb_build_object('payload', coalesce(x.ev->'payload', '{}'::jsonb) || jsonb_build_object('leaderboard',
                CASE WHEN jsonb_typeof(x.ev->'payload'->'leaderboard') = 'object' THEN x.ev->'payload'->'leaderboard' ELSE '{}'::jsonb END
                || jsonb_build_object('previousRank', rk.pr, 'rank', rk.nr)))
            ELSE x.ev END AS ev
          FROM jsonb_array_elements(c->'changes') WITH ORDINALITY AS x(ev, i)
          LEFT JOIN LATERAL (
            SELECT CASE WHEN f.r0 <= (x.ev->'rank'->>'cap')::numeric THEN f.r0 END AS pr,
              CASE WHEN f.r1 <= (x.ev->'rank'->>'cap')::numeric THEN f.r1 END AS nr
            FROM (SELECT (array_agg((ranks[l.j::integer]->>0)::numeric ORDER BY l.j))[1] AS r0,
                (array_agg((ranks[l.j::integer]->>1)::numeric ORDER BY l.j DESC))[1] AS r1
              FROM jsonb_array_elements(c->'leaderboard') WITH ORDINALITY AS l(lb, j)
              WHERE l.lb->>'index' = x.ev->'rank'->>'index' AND l.lb->>'userId' = uid) f
          ) rk ON jsonb_typeof(x.ev->'rank') = 'object'
          WHERE jsonb_typeof(x.ev->'rank') IS DISTINCT FROM 'object' OR rk.pr IS DISTINCT FROM rk.nr) s;
        outbox_sets := array_append(outbox_sets, settled);
      ELSE
        outbox_sets := array_append(outbox_sets, c->'changes');
      END IF;
    END IF;
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
    -- (007) The change events of the applied commits, in commit order (seq follows it). An event id stored
    -- already is not stored again.
    IF cardinality(outbox_sets) > 0 THEN
      INSERT INTO "{{schema}}".outbox (id, type, user_id, at, payload)
        SELECT x.ev->>'id', x.ev->>'type', x.ev->>'userId', x.ev->>'at', coalesce(x.ev->'payload', '{}'::jsonb)
        FROM unnest(outbox_sets) WITH ORDINALITY AS s(evs, k), jsonb_array_elements(s.evs) WITH ORDINALITY AS x(ev, i)
        ORDER BY s.k, x.i
        ON CONFLICT (id) DO NOTHING;
    END IF;
  END IF;

  RETURN to_jsonb(results);
END
$fn$;

-- erase_user as in migration 005, and (007) the user's change events and due instant.
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
-- (007) Also deletes the user's change events (outbox rows about the user); an erasure's user row takes the
-- due instant with it; a reset's commit appends `reset.changes` (completed as any commit's) and sets the due
-- instant to `reset.due`, or clears it.
-- Per-user data added in the future is to be deleted here too.
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
  LOCK TABLE "{{schema}}".outbox IN ROW EXCLUSIVE MODE;
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
  DELETE FROM "{{schema}}".outbox WHERE user_id = uid;
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
      'due', coalesce(e->'reset'->'due', 'null'::jsonb))), token, sql_ranks);
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

-- (007) readChanges: change events in commit order, strictly after (after_xid, after_seq), at most lim, below a
-- horizon no outbox row can appear under later. Two steps, each its own statement and so its own snapshot
-- (a VOLATILE function under READ COMMITTED):
-- 1. x1: the next transaction id now; w: the oldest transaction writing the outbox now (they take its lock
--    before their first write, so before they have an id; pg_locks' 32-bit ids are widened with x1's epoch).
-- 2. In a later snapshot: below w, below every transaction still running that got its id since step 1 (it
--    may be a writer that took the lock after it), and below the snapshot's xmax. A transaction that had an
--    id at step 1 without holding the lock never writes the outbox, so it holds nothing back: transactions
--    open on the server before the read never delay it (those begun during it may, briefly).
CREATE OR REPLACE FUNCTION "{{schema}}".read_changes(after_xid xid8, after_seq bigint, lim integer)
  RETURNS TABLE (pos_xid text, pos_seq text, id text, type text, user_id text, at text, payload jsonb)
  LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  x1 bigint;
  w bigint;
BEGIN
  x1 := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
  SELECT min(CASE WHEN ((x1 >> 32) << 32) + t.x32 > x1 THEN ((x1 >> 32) << 32) + t.x32 - 4294967296 ELSE ((x1 >> 32) << 32) + t.x32 END)
    INTO w
    FROM (SELECT l.transactionid::text::bigint AS x32 FROM pg_locks l
           WHERE l.locktype = 'transactionid' AND l.granted
             AND EXISTS (SELECT 1 FROM pg_locks o WHERE o.virtualtransaction = l.virtualtransaction
                           AND o.locktype = 'relation' AND o.relation = '"{{schema}}".outbox'::regclass)) t;
  RETURN QUERY
    WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
    horizon AS MATERIALIZED (
      SELECT least(
               coalesce(w, 9223372036854775807),
               coalesce((SELECT min(x::text::bigint) FROM snap, pg_snapshot_xip(snap.s) AS x WHERE x::text::bigint >= x1), 9223372036854775807),
               (SELECT pg_snapshot_xmax(s)::text::bigint FROM snap)) AS h)
    SELECT o.xid::text, o.seq::text, o.id, o.type, o.user_id::text, o.at::text, o.payload
      FROM "{{schema}}".outbox o
     WHERE (o.xid, o.seq) > (after_xid, after_seq) AND o.xid < (SELECT h FROM horizon)::text::xid8
     ORDER BY o.xid, o.seq
     LIMIT lim;
END
$fn$;
