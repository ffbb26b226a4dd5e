-- +goose Up
-- One row per scheduled job (jobguard): taken while locked_until is ahead
-- of the database clock; owner is empty once the run released and only
-- hold-at-least keeps it. Rows are never deleted, so a job's tokens only grow.
CREATE TABLE sqllock_jobs (
    name         varchar(255) NOT NULL PRIMARY KEY,
    owner        varchar(64)  NOT NULL,
    locked_by    varchar(255) NOT NULL,
    token        bigint       NOT NULL,
    locked_at    timestamptz  NOT NULL,
    locked_until timestamptz  NOT NULL
);

-- +goose Down
DROP TABLE sqllock_jobs;
