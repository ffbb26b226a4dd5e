-- Triggers: how many of the table's two triggers (ddl_triggers) exist; a
-- take needs a transaction of its own unless both do.
SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ('sqllock_locks_token_in', 'sqllock_locks_token_up')
