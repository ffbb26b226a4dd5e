-- +goose Up
-- optimistic: one row per key. version is the fencing token of the last
-- Acquire, drawn from the sqllock_fence row in the same transaction; Release
-- negates it, so a positive version means "stamped and not yet released".
CREATE TABLE sqllock_versions (
    lock_key TEXT    NOT NULL PRIMARY KEY,
    version  INTEGER NOT NULL
);

-- +goose Down
DROP TABLE sqllock_versions;
