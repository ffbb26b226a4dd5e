-- Live: the keys held now among those that follow: the text ends in
-- "IN (", and the caller adds a ? per key and ")".
SELECT lock_key FROM `sqllock_locks` WHERE expires_at > UTC_TIMESTAMP(6) AND lock_key IN (
