-- Laurel schema, version 2. "{{schema}}" is replaced by the store's schema name (default "laurel").
-- Commit tokens: every commit writes a random token into the user's row, so that a commit whose connection
-- broke while COMMIT was in flight can be read back: committed or not.
ALTER TABLE "{{schema}}".users ADD COLUMN IF NOT EXISTS commit_id text;
