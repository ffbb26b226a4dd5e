-- TakeFree: host, owner, TTL µs, key. A claim that expects the key free,
-- on a quiet key whose row the store saw lately (seenRows), tries this
-- plain UPDATE of a free row first: the server runs it for less than the
-- upsert (docs/performance.md), and LAST_INSERT_ID(expr) brings the token
-- back in the reply, with no result set. NEXTVAL in SET runs under the
-- row lock, as in the upsert. A row that is absent, held, or already the
-- claimant's is left to the upsert (take), a second statement.
--
-- The UPDATEs name the key's row through the primary key, never an
-- expires_at index (which MariaDB preferred when few rows were live, and
-- a table made before migration 00012 still has): a statement then waits
-- for the row lock of a take still in flight, and runs after it. A
-- give-back of a take cut off in flight relies on that
-- (Table.TakeDetached).
UPDATE `sqllock_locks` FORCE INDEX (PRIMARY) SET token = LAST_INSERT_ID(NEXTVAL(sqllock_fence_seq)),
	hold_count = 1, acquired_at = UTC_TIMESTAMP(6), host = ?, owner = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)
