-- ReapDelete: grace µs, then the keys reap_find found: the text ends in
-- "IN (", and the caller adds a ? per key and ")". Deletes them by
-- primary key, each only if still expired under its row lock.
DELETE FROM `sqllock_locks` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND lock_key IN (
