-- +goose Up
-- optimistic: one row per key. version is the fencing token of the last
-- Acquire, drawn from sqllock_fence_seq; Release negates it, so a positive
-- version means "stamped and not yet released". varbinary keys compare byte
-- for byte, as in sqllock_locks.
CREATE TABLE sqllock_versions (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    version  bigint         NOT NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_versions;
