-- name: Insert
INSERT INTO sqllock_elections (name, term, value, since) VALUES (?, ?, ?, UTC_TIMESTAMP(6))

-- name: Leader
SELECT e.value, e.term, e.since FROM sqllock_elections e JOIN sqllock_locks l ON l.token = e.term
WHERE e.name = ? AND l.lock_key = ? AND l.expires_at > UTC_TIMESTAMP(6)

-- name: Since
SELECT value, term, since FROM sqllock_elections WHERE name = ? AND term > ? ORDER BY term
