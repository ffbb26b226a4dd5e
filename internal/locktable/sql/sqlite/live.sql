-- Live: the keys held now among those that follow: the text ends in
-- "IN (", and the caller adds ?1 to ?n and ")" for n keys.
SELECT lock_key FROM `sqllock_locks` WHERE expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER) AND lock_key IN (
