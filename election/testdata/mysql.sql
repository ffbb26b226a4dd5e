-- name: Insert
INSERT INTO sqllock_elections (name, term, value, since)
SELECT ?, ?, ?, UTC_TIMESTAMP(6) FROM DUAL WHERE @@SESSION.sql_mode LIKE '%STRICT%'

-- name: Leader
SELECT e.value, e.term, e.since FROM sqllock_elections e JOIN sqllock_locks l ON l.token = e.term
WHERE e.name = ? AND l.lock_key = ? AND l.expires_at > UTC_TIMESTAMP(6)

-- name: Since
SELECT value, term, since FROM sqllock_elections WHERE name = ? AND term > ? ORDER BY term

-- name: Start
SELECT COALESCE(MAX(CASE WHEN l.lock_key IS NOT NULL THEN e.term - 1 END), MAX(e.term), 0)
FROM sqllock_elections e LEFT JOIN sqllock_locks l ON l.lock_key = ? AND l.token = e.term AND l.expires_at > UTC_TIMESTAMP(6)
WHERE e.name = ?

-- name: Strict
SELECT @@SESSION.sql_mode
