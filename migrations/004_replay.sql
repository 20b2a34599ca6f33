-- Laurel schema, version 4. "{{schema}}" is replaced by the store's schema name (default "laurel").

-- readUserLedger: one user's rows in commit order, a page after a seq. seq is the ledger's insertion order;
-- commit_batch inserts the rows of its commits in order, and a user's commits are serialised by the version
-- check on the user's row, so one user's rows in seq order are in commit order.
CREATE INDEX IF NOT EXISTS ledger_user_seq ON "{{schema}}".ledger (user_id, seq);

-- listUsers: user ids in UTF-16 code-unit order (JavaScript's string order), as utf16_hex (migration 002)
-- writes them; the primary key's COLLATE "C" (UTF-8 byte order) differs from it above U+FFFF.
CREATE INDEX IF NOT EXISTS users_utf16 ON "{{schema}}".users ("{{schema}}".utf16_hex(user_id));
