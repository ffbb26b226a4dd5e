-- name: Try
SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token() END

-- name: TryKnownEra
SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token_async() END

-- name: TryKnownTimeline
SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token_counter() END

-- name: Block
SELECT sqllock_next_token() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted

-- name: BlockKnownEra
SELECT sqllock_next_token_async() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted

-- name: BlockKnownTimeline
SELECT sqllock_next_token_counter() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted

-- name: Unlock
SELECT pg_advisory_unlock($1)

-- name: TryShared
SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token() END

-- name: TrySharedKnownEra
SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token_async() END

-- name: TrySharedKnownTimeline
SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token_counter() END

-- name: BlockShared
SELECT sqllock_next_token() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted

-- name: BlockSharedKnownEra
SELECT sqllock_next_token_async() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted

-- name: BlockSharedKnownTimeline
SELECT sqllock_next_token_counter() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted

-- name: UnlockShared
SELECT pg_advisory_unlock_shared($1)

-- name: UnlockAll
SELECT pg_advisory_unlock_all()::text

-- name: TxTry
SELECT CASE WHEN pg_try_advisory_xact_lock($1) THEN sqllock_next_token() END

-- name: TxLock
SELECT sqllock_next_token() FROM (SELECT pg_advisory_xact_lock($1) OFFSET 0) AS granted

-- name: BackendID
SELECT pg_backend_pid()

-- name: Interrupt
SELECT pg_cancel_backend(12345)

-- name: TokenEra
SELECT sqllock_token_era()
