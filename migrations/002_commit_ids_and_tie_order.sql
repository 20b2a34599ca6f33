-- Laurel schema, version 2. "{{schema}}" is replaced by the store's schema name (default "laurel").

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
