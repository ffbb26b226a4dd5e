-- +goose Up
-- rowlock: one row per key, locked with SELECT ... FOR UPDATE by the
-- transaction that holds the key. varbinary keys compare byte for byte.
-- The fencing token comes from NEXTVAL in the locking read itself; the
-- column keeps the token issued when the row was created.
CREATE TABLE sqllock_rows (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    token    bigint         NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_rows;
