-- name: Try
SELECT IF(GET_LOCK(?, 0) = 1, sqllock_next_token(), NULL)

-- name: Block
SELECT IF(GET_LOCK(?, ?) = 1, sqllock_next_token(), NULL)

-- name: Unlock
SELECT RELEASE_LOCK(?)

-- name: UnlockAll
SELECT RELEASE_ALL_LOCKS()

-- name: BackendID
SELECT CONNECTION_ID()

-- name: Interrupt
KILL QUERY 12345
