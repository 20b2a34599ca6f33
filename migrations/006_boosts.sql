-- Laurel schema, version 6. "{{schema}}" is replaced by the store's schema name (default "laurel").
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
