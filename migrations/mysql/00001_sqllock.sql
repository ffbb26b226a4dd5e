-- +goose Up
-- One sequence per database hands out every strategy's fencing tokens
-- (MariaDB 10.3+ sequence objects).
CREATE SEQUENCE sqllock_fence_seq;

-- varbinary keys compare byte for byte: no collation folds "A" into "a" or
-- pads "a " to "a".
CREATE TABLE sqllock_locks (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)    NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL,
    KEY sqllock_locks_expires_at (expires_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_locks;
DROP SEQUENCE sqllock_fence_seq;
