-- +goose Up
-- rowlock: one row per key, locked with SELECT ... FOR UPDATE by the
-- transaction that holds the key. token is the fencing token of the last
-- holder that committed.
CREATE TABLE sqllock_rows (
    lock_key varchar(255) NOT NULL PRIMARY KEY,
    token    bigint       NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE sqllock_rows;
