-- Take: key, owner, host, TTL µs. An upsert that takes a free or expired
-- row under a new token, adds a hold to the owner's own row, or leaves
-- another's row as it is, and returns the row as it left it: owner (who
-- won), token, hold_count, host, µs left, µs since its last hold began.
-- ON DUPLICATE KEY UPDATE assigns left to right and later clauses see
-- earlier ones, so owner and expires_at, which the conditions read, come
-- last. NEXTVAL in the update runs under the row lock.
INSERT INTO `sqllock_locks` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, ?, 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	hold_count  = IF(expires_at <= UTC_TIMESTAMP(6), 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),
	acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner = VALUES(owner), VALUES(host), host),
	owner       = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at  = IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
RETURNING owner, token, hold_count, host, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
	TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6))
