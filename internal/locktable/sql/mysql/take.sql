-- Take, on the MySQL path: key, owner, host, TTL µs. The upsert draws
-- its token with sqllock_next_token() (migration 00010) under the row
-- lock, and says who won through LAST_INSERT_ID: the token when the row
-- is ours, 0 when it is another's (tokens start at 1). The VALUES row is
-- built (and a ticket drawn) before the duplicate is found; the update
-- sets LAST_INSERT_ID again, last, so the client sees the outcome for the
-- row as it left it. ON DUPLICATE KEY UPDATE assigns left to right, as in
-- MariaDB's take. A take that inserted the row is one round trip; any
-- other reads the row after, with peek.
INSERT INTO `sqllock_locks` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, ?, 1, LAST_INSERT_ID(sqllock_next_token()), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(sqllock_next_token()),
	                 IF(owner = VALUES(owner), LAST_INSERT_ID(token), token + LAST_INSERT_ID(0))),
	hold_count  = IF(expires_at <= UTC_TIMESTAMP(6), 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),
	acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner = VALUES(owner), VALUES(host), host),
	owner       = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at  = IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
