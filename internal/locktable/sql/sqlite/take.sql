-- Take: ?1 key, ?2 owner, ?3 host, ?4 TTL µs. Takes a free or expired
-- row under a new token (the fence row's value + 1, and above the row's
-- own), or adds a hold to the owner's own row; returns (token,
-- hold_count), no row where another holds the key. It runs alone where
-- the table's triggers bump the fence row to the new token (ddl_triggers,
-- migration 00018), or first in a transaction that bumps it with fence: a
-- write, so SQLite takes its one write lock before the fence is read, and
-- no other writer interleaves.
INSERT INTO `sqllock_locks` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, ?3, 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), CAST(unixepoch('subsec') * 1000000 AS INTEGER), CAST(unixepoch('subsec') * 1000000 AS INTEGER) + ?4)
ON CONFLICT (lock_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.token ELSE MAX(excluded.token, t.token + 1) END,
	hold_count  = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.hold_count + 1 ELSE 1 END,
	acquired_at = CASE WHEN t.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) THEN t.acquired_at ELSE excluded.acquired_at END,
	expires_at  = MAX(t.expires_at, excluded.expires_at),
	owner       = excluded.owner,
	host        = excluded.host
WHERE t.expires_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) OR t.owner = excluded.owner
RETURNING token, hold_count
