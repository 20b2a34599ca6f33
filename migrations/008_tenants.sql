-- Laurel schema, version 8. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Multi-tenancy (issue 16, Store.tenant): every table of per-user or per-store data gets a `tenant` column, the
-- default tenant's rows (every row stored before this migration) hold tenant '', and every primary key and
-- index leads with it, so that a tenant's reads seek into its own part of each index: no read costs in
-- proportion to another tenant's data. The server-side functions take the tenant as their last argument;
-- their old signatures are dropped, so no statement can write a row without one.
-- Upgrade cost: adding the columns is a catalogue change (a constant default, no table rewrite), but every
-- primary key and index below is built again, holding each table locked against reads and writes until the
-- migration commits (one transaction): on large tables, run it in a quiet moment. Stop processes of earlier
-- versions first: the functions they call are gone, and their statements fail (they write nothing).

ALTER TABLE "{{schema}}".users ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".idempotency ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".ledger ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".entries ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".rank_history ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".counters ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".index_sizes ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".entry_removals ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".boosts ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".outbox ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".consumers ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".marks ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE "{{schema}}".deliveries ADD COLUMN IF NOT EXISTS tenant text COLLATE "C" NOT NULL DEFAULT '';

-- Primary keys and unique keys, under their old names, with the tenant first. The ledger's and the delivery
-- outcomes' keys (seq) are unique across tenants and stay as they are. Boost ids are a tenant's own (a boost
-- written in one tenant never replaces another tenant's boost of the same id), as are event ids (an event
-- stored already is not stored again: in its tenant).
ALTER TABLE "{{schema}}".users DROP CONSTRAINT IF EXISTS users_pkey, ADD CONSTRAINT users_pkey PRIMARY KEY (tenant, user_id);
ALTER TABLE "{{schema}}".idempotency DROP CONSTRAINT IF EXISTS idempotency_pkey, ADD CONSTRAINT idempotency_pkey PRIMARY KEY (tenant, user_id, metric_key, key);
ALTER TABLE "{{schema}}".entries DROP CONSTRAINT IF EXISTS entries_pkey, ADD CONSTRAINT entries_pkey PRIMARY KEY (tenant, idx, user_id);
ALTER TABLE "{{schema}}".rank_history DROP CONSTRAINT IF EXISTS rank_history_pkey, ADD CONSTRAINT rank_history_pkey PRIMARY KEY (tenant, idx, user_id, date);
ALTER TABLE "{{schema}}".counters DROP CONSTRAINT IF EXISTS counters_pkey, ADD CONSTRAINT counters_pkey PRIMARY KEY (tenant, name);
ALTER TABLE "{{schema}}".index_sizes DROP CONSTRAINT IF EXISTS index_sizes_pkey, ADD CONSTRAINT index_sizes_pkey PRIMARY KEY (tenant, idx);
ALTER TABLE "{{schema}}".entry_removals DROP CONSTRAINT IF EXISTS entry_removals_pkey, ADD CONSTRAINT entry_removals_pkey PRIMARY KEY (tenant, user_id, idx);
ALTER TABLE "{{schema}}".boosts DROP CONSTRAINT IF EXISTS boosts_pkey, ADD CONSTRAINT boosts_pkey PRIMARY KEY (tenant, id);
-- readChanges and pruneChanges: a tenant's events in (xid, seq) order.
ALTER TABLE "{{schema}}".outbox DROP CONSTRAINT IF EXISTS outbox_pkey, ADD CONSTRAINT outbox_pkey PRIMARY KEY (tenant, xid, seq);
ALTER TABLE "{{schema}}".outbox DROP CONSTRAINT IF EXISTS outbox_id_key, ADD CONSTRAINT outbox_id_key UNIQUE (tenant, id);
ALTER TABLE "{{schema}}".consumers DROP CONSTRAINT IF EXISTS consumers_pkey, ADD CONSTRAINT consumers_pkey PRIMARY KEY (tenant, name);
ALTER TABLE "{{schema}}".marks DROP CONSTRAINT IF EXISTS marks_pkey, ADD CONSTRAINT marks_pkey PRIMARY KEY (tenant, mark);

-- The indexes of migrations 001 to 007, under their old names, with the tenant first (what each serves is
-- said where it was first made).
DROP INDEX IF EXISTS "{{schema}}".ledger_range;
CREATE INDEX ledger_range ON "{{schema}}".ledger (tenant, user_id, kind, key, at, seq);
DROP INDEX IF EXISTS "{{schema}}".ledger_user_seq;
CREATE INDEX ledger_user_seq ON "{{schema}}".ledger (tenant, user_id, seq);
DROP INDEX IF EXISTS "{{schema}}".ledger_metric_recent;
CREATE INDEX ledger_metric_recent ON "{{schema}}".ledger (tenant, user_id, at, key, seq) WHERE kind = 'metric';
DROP INDEX IF EXISTS "{{schema}}".entries_order;
CREATE INDEX entries_order ON "{{schema}}".entries (tenant, idx, neg_value, reached_at, user_utf16);
DROP INDEX IF EXISTS "{{schema}}".entries_user;
CREATE INDEX entries_user ON "{{schema}}".entries (tenant, user_id);
DROP INDEX IF EXISTS "{{schema}}".rank_history_user;
CREATE INDEX rank_history_user ON "{{schema}}".rank_history (tenant, user_id);
DROP INDEX IF EXISTS "{{schema}}".users_utf16;
CREATE INDEX users_utf16 ON "{{schema}}".users (tenant, "{{schema}}".utf16_hex(user_id));
DROP INDEX IF EXISTS "{{schema}}".users_due;
CREATE INDEX users_due ON "{{schema}}".users (tenant, due, user_id) WHERE due IS NOT NULL;
DROP INDEX IF EXISTS "{{schema}}".boosts_system;
CREATE INDEX boosts_system ON "{{schema}}".boosts (tenant, system, id);
DROP INDEX IF EXISTS "{{schema}}".boosts_user;
CREATE INDEX boosts_user ON "{{schema}}".boosts (tenant, user_id);
DROP INDEX IF EXISTS "{{schema}}".outbox_user;
CREATE INDEX outbox_user ON "{{schema}}".outbox (tenant, user_id) WHERE user_id IS NOT NULL;
DROP INDEX IF EXISTS "{{schema}}".outbox_at;
CREATE INDEX outbox_at ON "{{schema}}".outbox (tenant, at);
DROP INDEX IF EXISTS "{{schema}}".deliveries_consumer;
CREATE INDEX deliveries_consumer ON "{{schema}}".deliveries (tenant, consumer, seq);
DROP INDEX IF EXISTS "{{schema}}".deliveries_at;
CREATE INDEX deliveries_at ON "{{schema}}".deliveries (tenant, at);

-- The functions of migration 007 without a tenant: gone, so that nothing calls them by mistake.
DROP FUNCTION IF EXISTS "{{schema}}".commit_batch(jsonb, text, boolean);
DROP FUNCTION IF EXISTS "{{schema}}".erase_user(jsonb, text, boolean);
DROP FUNCTION IF EXISTS "{{schema}}".read_changes(xid8, bigint, integer);

-- A boost is its tenant's (the ledger row's tenant): as in migration 006, within the row's tenant.
CREATE OR REPLACE FUNCTION "{{schema}}".ledger_boosts() RETURNS trigger
  LANGUAGE plpgsql
  AS $fn$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM "{{schema}}".boosts WHERE tenant = OLD.tenant AND id = OLD.data->'result'->'boost'->>'id' AND user_id = OLD.user_id;
  ELSIF NEW.key = 'createBoost' THEN
    INSERT INTO "{{schema}}".boosts (tenant, id, user_id, system, boost)
      VALUES (NEW.tenant, NEW.data->'result'->'boost'->>'id', NEW.user_id, NEW.data->'result'->'boost'->>'pointsSystemKey', NEW.data->'result'->'boost')
      ON CONFLICT (tenant, id) DO UPDATE SET user_id = EXCLUDED.user_id, system = EXCLUDED.system, boost = EXCLUDED.boost;
  ELSE
    DELETE FROM "{{schema}}".boosts WHERE tenant = NEW.tenant AND id = NEW.data->>'id' AND user_id = NEW.user_id;
  END IF;
  RETURN NULL;
END
$fn$;

-- commit_batch(commits, token, sql_ranks, tenant_id): as in migration 007, within tenant `tenant_id` ('' for the
-- default tenant): every row it reads, locks or writes is the tenant's.
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
                  WHERE x.tenant = tenant_id AND x.idx = w.index AND (x.neg_value, x.reached_at, x.user_utf16) < (-w_value, w."reachedAt", u16)) n
          LEFT JOIN LATERAL (
            SELECT e.value,
              (SELECT count(*) FROM "{{schema}}".entries x WHERE x.tenant = e.tenant AND x.idx = e.idx AND (x.neg_value, x.reached_at, x.user_utf16) < (e.neg_value, e.reached_at, e.user_utf16)) + 1 AS rank,
              (e.neg_value, e.reached_at, e.user_utf16) < (-w_value, w."reachedAt", u16) AS lt
            FROM "{{schema}}".entries e WHERE e.tenant = tenant_id AND e.idx = w.index AND e.user_id = w."userId") p ON true;
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
    INSERT INTO "{{schema}}".ledger (tenant, id, user_id, kind, key, at, delta, total, data)
      SELECT tenant_id, r.id, r."userId", r.kind, r.key, r.at, r.delta, r.total, r.data
      FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i),
        ROWS FROM (jsonb_to_recordset(x.e->'ledger') AS (id text, "userId" text, kind text, key text, at text, delta double precision, total double precision, data jsonb)) WITH ORDINALITY AS r
      WHERE x.i = ANY (applied)
      ORDER BY x.i, r.ordinality;
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
    INSERT INTO "{{schema}}".counters (tenant, name, value)
      SELECT tenant_id, k.key, sum(k.value::bigint)::bigint
      FROM jsonb_array_elements(commits) WITH ORDINALITY AS x(e, i), jsonb_each_text(x.e->'counters') AS k
      WHERE x.i = ANY (applied)
      GROUP BY k.key
      ORDER BY k.key COLLATE "C"
      ON CONFLICT (tenant, name) DO UPDATE SET value = "{{schema}}".counters.value + EXCLUDED.value;
    -- (007) The change events of the applied commits, in commit order (seq follows it). An event id stored
    -- already is not stored again.
    IF cardinality(outbox_sets) > 0 THEN
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

-- erase_user(e, token, sql_ranks, tenant_id): as in migration 007, within tenant `tenant_id`.
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
    -- The removals above are this reset's own, not the user's history.
    DELETE FROM "{{schema}}".entry_removals WHERE tenant = tenant_id AND user_id = uid AND idx = ANY (held);
    RETURN jsonb_build_object('erased', true, 'version', expected + 1, 'indexes', to_jsonb(idxs));
  END IF;
  DELETE FROM "{{schema}}".users WHERE tenant = tenant_id AND user_id = uid;
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

-- read_changes(after_xid, after_seq, lim, tenant_id): as in migration 007, the events of tenant `tenant_id` only,
-- on outbox_pkey (tenant, xid, seq). The horizon is the server's: an outbox writer of any tenant still in
-- flight holds back every tenant's readers until it ends (briefly; it costs no reads of its rows).
CREATE OR REPLACE FUNCTION "{{schema}}".read_changes(after_xid xid8, after_seq bigint, lim integer, tenant_id text)
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
     WHERE o.tenant = tenant_id AND (o.xid, o.seq) > (after_xid, after_seq) AND o.xid < (SELECT h FROM horizon)::text::xid8
     ORDER BY o.xid, o.seq
     LIMIT lim;
END
$fn$;
