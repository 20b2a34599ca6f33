/**
 * The PostgreSQL schema, as ordered migrations. The same SQL ships as files in `migrations/` (a test keeps
 * them identical); `{{schema}}` stands for the store's schema name.
 */
export const MIGRATIONS: readonly { id: string; sql: string }[] = [
  {
    id: '001_init',
    sql: `-- Laurel schema, version 1. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Text columns that are compared for order use the "C" collation: byte order, as ISO instants need.
CREATE SCHEMA IF NOT EXISTS "{{schema}}";

CREATE TABLE IF NOT EXISTS "{{schema}}".users (
  user_id text COLLATE "C" PRIMARY KEY,
  version integer NOT NULL,
  state jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS "{{schema}}".idempotency (
  user_id text COLLATE "C" NOT NULL,
  metric_key text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  event_id text NOT NULL,
  at text COLLATE "C" NOT NULL,
  PRIMARY KEY (user_id, metric_key, key)
);

CREATE TABLE IF NOT EXISTS "{{schema}}".ledger (
  seq bigserial PRIMARY KEY,
  id text NOT NULL,
  user_id text COLLATE "C" NOT NULL,
  kind text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  at text COLLATE "C" NOT NULL,
  delta double precision NOT NULL,
  total double precision NOT NULL,
  data jsonb
);
-- Every ledger read is one user's rows of one kind and key in a range of instants.
CREATE INDEX IF NOT EXISTS ledger_range ON "{{schema}}".ledger (user_id, kind, key, at, seq);

CREATE TABLE IF NOT EXISTS "{{schema}}".entries (
  idx text COLLATE "C" NOT NULL,
  user_id text COLLATE "C" NOT NULL,
  value double precision NOT NULL,
  neg_value double precision NOT NULL,
  reached_at text COLLATE "C" NOT NULL,
  PRIMARY KEY (idx, user_id)
);
-- Rank order: higher value, then earlier reached_at, then user id; stored ascending as (-value, ...).
CREATE INDEX IF NOT EXISTS entries_rank ON "{{schema}}".entries (idx, neg_value, reached_at, user_id);

CREATE TABLE IF NOT EXISTS "{{schema}}".rank_history (
  idx text COLLATE "C" NOT NULL,
  user_id text COLLATE "C" NOT NULL,
  date text COLLATE "C" NOT NULL,
  previous_rank integer,
  rank integer,
  previous_value double precision,
  value double precision,
  PRIMARY KEY (idx, user_id, date)
);

CREATE TABLE IF NOT EXISTS "{{schema}}".counters (
  name text COLLATE "C" PRIMARY KEY,
  value bigint NOT NULL
);
`,
  },
  {
    id: '002_commit_ids_and_tie_order',
    sql: `-- Laurel schema, version 2. "{{schema}}" is replaced by the store's schema name (default "laurel").

-- Commit tokens: every commit writes a random token into the user's row, so that a commit whose connection
-- broke while COMMIT was in flight can be read back: committed or not.
ALTER TABLE "{{schema}}".users ADD COLUMN IF NOT EXISTS commit_id text;

-- Ties on (value, reached_at) are ordered by user id in UTF-16 code-unit order, as in the memory store and the
-- Redis rank index (JavaScript's string order). UTF-8 byte order (COLLATE "C") differs from it between
-- characters above U+FFFF and those from U+E000 to U+FFFF. utf16_hex(s) writes each UTF-16 code unit of s as
-- 4 lower-case hex digits, so byte order of the result is code-unit order of s (needs a UTF8 database).
CREATE OR REPLACE FUNCTION "{{schema}}".utf16_hex(s text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT coalesce(string_agg(CASE WHEN ascii(c) < 65536 THEN lpad(to_hex(ascii(c)), 4, '0') ELSE to_hex(55232 + (ascii(c) >> 10)) || to_hex(56320 + (ascii(c) & 1023)) END, '' ORDER BY i), '') FROM unnest(string_to_array(s, NULL)) WITH ORDINALITY AS u(c, i) $$;

-- Filled for existing rows when the column is added (the table is rewritten once), kept by every write.
ALTER TABLE "{{schema}}".entries ADD COLUMN IF NOT EXISTS user_utf16 text COLLATE "C" GENERATED ALWAYS AS ("{{schema}}".utf16_hex(user_id)) STORED;
-- Rank order: higher value, then earlier reached_at, then user id by code units; replaces entries_rank.
CREATE INDEX IF NOT EXISTS entries_order ON "{{schema}}".entries (idx, neg_value, reached_at, user_utf16);
DROP INDEX IF EXISTS "{{schema}}".entries_rank;
`,
  },
  {
    id: '003_commit_batch',
    sql: `-- Laurel schema, version 3. "{{schema}}" is replaced by the store's schema name (default "laurel").

-- utf16_hex (migration 002), same results, cheaper: it is evaluated on every entry write (the generated user_utf16 column)
-- and by rank counts, and a plpgsql function keeps its plans for the session where a SQL function that
-- cannot be inlined is planned again by every statement that calls it. Printable ASCII (the common case)
-- takes a fast path: each byte is its own code unit.
CREATE OR REPLACE FUNCTION "{{schema}}".utf16_hex(s text) RETURNS text
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
  AS $fn$
BEGIN
  IF s ~ '^[ -~]*$' THEN
    RETURN regexp_replace(encode(convert_to(s, 'UTF8'), 'hex'), '(..)', '00\\1', 'g');
  END IF;
  RETURN (SELECT coalesce(string_agg(CASE WHEN ascii(c) < 65536 THEN lpad(to_hex(ascii(c)), 4, '0') ELSE to_hex(55232 + (ascii(c) >> 10)) || to_hex(56320 + (ascii(c) & 1023)) END, '' ORDER BY i), '') FROM unnest(string_to_array(s, NULL)) WITH ORDINALITY AS u(c, i));
END
$fn$;

-- Entries per index, so that a threshold (the value at rank maxParticipants) is 0 without any scan while the
-- index holds fewer entries than that rank. Kept by commit_batch, which adds its inserted and deleted
-- entries at the end of its statement, one row per index in index order (after users, entries and rank
-- history; before counters), so batches running side by side cannot deadlock on them. Entries writers are
-- held off while the counts are filled in.
CREATE TABLE IF NOT EXISTS "{{schema}}".index_sizes (
  idx text COLLATE "C" PRIMARY KEY,
  n bigint NOT NULL
);
LOCK TABLE "{{schema}}".entries IN SHARE MODE;
INSERT INTO "{{schema}}".index_sizes (idx, n)
  SELECT idx, count(*) FROM "{{schema}}".entries GROUP BY idx
  ON CONFLICT (idx) DO UPDATE SET n = EXCLUDED.n;

-- commit_batch(commits, token, sql_ranks): the store's commits (its Commit objects as one JSON array) applied
-- in order by one statement, so that a commit is one round trip and, outside an explicit transaction, one
-- transaction. Each commit is atomic on its own: every check that can refuse it (the user's version, its
-- idempotency key, an earlier refused commit of the same user in the batch) runs before its first write, so
-- a refused commit changes nothing and needs no subtransaction. Every write of a user's row stores the token,
-- by which a caller whose connection broke reads back whether the statement committed.
-- Locks: the users of a batch of several commits are locked first, in id order; counters are written last,
-- once per name, in name order; so batches running side by side cannot deadlock on them.
-- Ranks (sql_ranks) as counted before: 1 + the entries before the entry in (-value, reached_at, user id by
-- UTF-16 code units) order; one rank-history row per (index, user, date), whose first write of the day keeps
-- the previous rank and value. thresholdRank: the value at that rank after the write, 0 if there is none.
-- Returns one element per commit: {"conflict": "version" | "idempotency"}, or {"ranks": [...]} with one
-- [previous rank, rank, previous value, threshold] per leaderboard write (values as text, so -0 and every
-- digit survive; nulls where a mode or write has none).
-- index_sizes kept as above: a threshold scans the index only when it holds at least thresholdRank entries
-- (counting this statement's own inserts and deletes).
-- Fewer statements per write:
-- * a ranked write (not a removal) reads its previous value and rank and counts the entries ahead of its new
--   key in one statement before it writes, and writes its entry and its rank history in one statement;
-- * an unranked write without a threshold, on an index that no other write of the batch ranks, removes from
--   or reads a threshold of, is written at the end with the others in one statement (its answer is all nulls
--   in any case; the last write of a user to an index wins, as one by one).
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
`,
  },
  {
    id: '004_replay',
    sql: `-- Laurel schema, version 4. "{{schema}}" is replaced by the store's schema name (default "laurel").

-- readUserLedger: one user's rows in commit order, a page after a seq. seq is the ledger's insertion order;
-- commit_batch inserts the rows of its commits in order, and a user's commits are serialised by the version
-- check on the user's row, so one user's rows in seq order are in commit order.
CREATE INDEX IF NOT EXISTS ledger_user_seq ON "{{schema}}".ledger (user_id, seq);

-- listUsers: user ids in UTF-16 code-unit order (JavaScript's string order), as utf16_hex (migration 002)
-- writes them; the primary key's COLLATE "C" (UTF-8 byte order) differs from it above U+FFFF.
CREATE INDEX IF NOT EXISTS users_utf16 ON "{{schema}}".users ("{{schema}}".utf16_hex(user_id));
`,
  },
  {
    id: '005_users',
    sql: `-- Laurel schema, version 5. "{{schema}}" is replaced by the store's schema name (default "laurel").
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

-- erase_user(e, token, sql_ranks): Store.eraseUser as one statement, so one transaction. \`e\` is the store's
-- Erasure as JSON, with \`date\` (a local date for the reset's removal writes). Refused, changing nothing, when
-- the user's version is not \`expectedVersion\`: {"conflict": "version"}. For an absent user (expected 0):
-- {"erased": false, ...}. Else it lists every index the user has an entry, rank history or a removed entry
-- in, deletes the user's rank history, ledger, idempotency records and removals, then either
-- - erasure: deletes the user's row and entries, adjusts the index sizes (one row per index, in index order)
--   and applies the counter increments (in name order), so locks are taken in commit_batch's order: the
--   user's row first, index sizes, then counters; or
-- - reset (\`e.reset\`): applies one commit_batch commit of the reset state at expectedVersion + 1 whose
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
`,
  },
  {
    id: '006_boosts',
    sql: `-- Laurel schema, version 6. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Runtime boosts (issue 13): the listing of every user's boosts, for Store.listBoosts and Store.getBoost.

-- One row per boost a createBoost operation row made and no deleteBoost row removed. Written only by the
-- triggers below, so in the transaction (the statement) that writes the ledger rows: commit_batch's and
-- erase_user's atomicity covers it with no change to either function.
CREATE TABLE IF NOT EXISTS "{{schema}}".boosts (
  id text COLLATE "C" PRIMARY KEY,
  user_id text COLLATE "C" NOT NULL,
  system text COLLATE "C" NOT NULL,
  boost jsonb NOT NULL
);
-- listBoosts: one system's boosts in id order after a cursor. eraseUser: a user's boosts (see the triggers).
CREATE INDEX IF NOT EXISTS boosts_system ON "{{schema}}".boosts (system, id);
CREATE INDEX IF NOT EXISTS boosts_user ON "{{schema}}".boosts (user_id);

-- A createBoost row stores data.result.boost; a deleteBoost row removes the user's boost data.id; deleting a
-- createBoost row (erase_user deletes the user's ledger, for an erasure or a reset) removes its boost.
CREATE OR REPLACE FUNCTION "{{schema}}".ledger_boosts() RETURNS trigger
  LANGUAGE plpgsql
  AS $fn$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM "{{schema}}".boosts WHERE id = OLD.data->'result'->'boost'->>'id' AND user_id = OLD.user_id;
  ELSIF NEW.key = 'createBoost' THEN
    INSERT INTO "{{schema}}".boosts (id, user_id, system, boost)
      VALUES (NEW.data->'result'->'boost'->>'id', NEW.user_id, NEW.data->'result'->'boost'->>'pointsSystemKey', NEW.data->'result'->'boost')
      ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, system = EXCLUDED.system, boost = EXCLUDED.boost;
  ELSE
    DELETE FROM "{{schema}}".boosts WHERE id = NEW.data->>'id' AND user_id = NEW.user_id;
  END IF;
  RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS ledger_boosts_insert ON "{{schema}}".ledger;
CREATE TRIGGER ledger_boosts_insert AFTER INSERT ON "{{schema}}".ledger
  FOR EACH ROW WHEN (NEW.kind = 'operation' AND NEW.key IN ('createBoost', 'deleteBoost'))
  EXECUTE FUNCTION "{{schema}}".ledger_boosts();
DROP TRIGGER IF EXISTS ledger_boosts_delete ON "{{schema}}".ledger;
CREATE TRIGGER ledger_boosts_delete AFTER DELETE ON "{{schema}}".ledger
  FOR EACH ROW WHEN (OLD.kind = 'operation' AND OLD.key = 'createBoost')
  EXECUTE FUNCTION "{{schema}}".ledger_boosts();
`,
  },
  {
    id: '007_outbox',
    sql: `-- Laurel schema, version 7. "{{schema}}" is replaced by the store's schema name (default "laurel").
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
-- \`rank\` marker completed from the commit's own rank changes as settleChanges does (src/store/outbox.ts; with
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
    -- (007) The commit's change events. With SQL ranks, a leaderboard.rank_changed event with a \`rank\` marker
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
-- erase_user(e, token, sql_ranks): Store.eraseUser as one statement, so one transaction. \`e\` is the store's
-- Erasure as JSON, with \`date\` (a local date for the reset's removal writes). Refused, changing nothing, when
-- the user's version is not \`expectedVersion\`: {"conflict": "version"}. For an absent user (expected 0):
-- {"erased": false, ...}. Else it lists every index the user has an entry, rank history or a removed entry
-- in, deletes the user's rank history, ledger, idempotency records and removals, then either
-- - erasure: deletes the user's row and entries, adjusts the index sizes (one row per index, in index order)
--   and applies the counter increments (in name order), so locks are taken in commit_batch's order: the
--   user's row first, index sizes, then counters; or
-- - reset (\`e.reset\`): applies one commit_batch commit of the reset state at expectedVersion + 1 whose
--   leaderboard writes are the removal of each of the user's entries followed by the reset's own writes,
--   with the erasure's counters (commit_batch keeps the index sizes and ranks as for any commit).
-- (007) Also deletes the user's change events (outbox rows about the user); an erasure's user row takes the
-- due instant with it; a reset's commit appends \`reset.changes\` (completed as any commit's) and sets the due
-- instant to \`reset.due\`, or clears it.
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
`,
  },
  {
    id: '008_tenants',
    sql: `-- Laurel schema, version 8. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Multi-tenancy (issue 16, Store.tenant): every table of per-user or per-store data gets a \`tenant\` column, the
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

-- commit_batch(commits, token, sql_ranks, tenant_id): as in migration 007, within tenant \`tenant_id\` ('' for the
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
    -- (007) The commit's change events. With SQL ranks, a leaderboard.rank_changed event with a \`rank\` marker
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

-- erase_user(e, token, sql_ranks, tenant_id): as in migration 007, within tenant \`tenant_id\`.
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

-- read_changes(after_xid, after_seq, lim, tenant_id): as in migration 007, the events of tenant \`tenant_id\` only,
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
`,
  },
  {
    id: '009_lean_commit',
    sql: `-- Laurel schema, version 9. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Less server work per commit (issue 11): commit_batch as in migration 008, with the same rows, ranks, results
-- and change events. Nothing else changes.

-- commit_batch(commits, token, sql_ranks, tenant_id): as in migration 008, with less server work per call.
-- - One commit: its ledger rows, counters and change events inserted straight from it. The statements over the
--   applied commits (x.i = ANY (applied), unnest(outbox_sets)) were planned again on every call (their custom
--   plans looked cheaper than a generic one); these are planned once per session.
-- - One commit: no late unranked writes (each write goes in its turn, as the late statement's rows would).
-- - The rank_changed markers settled in the function's own loop over the commit's changes, from the first and
--   last rank change of each index of the commit's user (kept while writing), not by a query over its writes.
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
`,
  },
  {
    id: '010_rank_scan',
    sql: `-- Laurel schema, version 10. "{{schema}}" is replaced by the store's schema name (default "laurel").
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
`,
  },
  {
    id: '011_reset_removals',
    sql: `-- Laurel schema, version 11. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- A reset remembers where it erased the user (issue 11's review): erase_user as in migration 008, except that a
-- reset (e.reset) records every index it erased the user from in entry_removals, so that a later erasure of
-- the user lists those indexes too. Nothing else changes. A reset made before this migration is not listed by
-- a later erasure (rebuildRankIndex the indexes of such a user to be sure).

-- erase_user(e, token, sql_ranks, tenant_id): as in migration 008, with the reset's indexes remembered.
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
`,
  },
  {
    id: '012_erase_board_runs',
    sql: `-- Laurel schema, version 12. "{{schema}}" is replaced by the store's schema name (default "laurel").
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
`,
  },
];
