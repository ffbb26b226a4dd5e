-- Live: the keys held now among those that follow: the text ends in
-- "IN (", and the caller adds a $n per key and ")".
SELECT lock_key FROM "sqllock_locks" WHERE expires_at > now() AND lock_key IN (
