-- name: Insert
INSERT INTO sqllock_elections (name, term, value, since) VALUES (?1, ?2, ?3, CAST(unixepoch('subsec') * 1000000 AS INTEGER))

-- name: Leader
SELECT e.value, e.term, e.since FROM sqllock_elections e JOIN sqllock_locks l ON l.token = e.term
WHERE e.name = ?1 AND l.lock_key = ?2 AND l.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)

-- name: Since
SELECT value, term, since FROM sqllock_elections WHERE name = ?1 AND term > ?2 ORDER BY term

-- name: Start
SELECT COALESCE(max(CASE WHEN l.lock_key IS NOT NULL THEN e.term - 1 END), max(e.term), 0)
FROM sqllock_elections e LEFT JOIN sqllock_locks l ON l.lock_key = ?1 AND l.token = e.term AND l.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
WHERE e.name = ?2
