-- +goose Up
-- optimistic: one row per key. version is the fencing token of the last
-- Acquire, drawn from sqllock_fence_seq; Release negates it, so a positive
-- version means "stamped and not yet released".
CREATE TABLE sqllock_versions (
    lock_key varchar(255) NOT NULL PRIMARY KEY,
    version  bigint       NOT NULL
);

-- +goose Down
DROP TABLE sqllock_versions;
