-- Peek: the row of ?1 (key), live or not: owner, token, hold_count, host
-- and the microseconds left. A plain read takes no lock in WAL mode, so
-- waiters polling a held key do not queue for the write lock ahead of the
-- holder's renewals and release.
SELECT owner, token, hold_count, host, expires_at - CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM `sqllock_locks` WHERE lock_key = ?1
