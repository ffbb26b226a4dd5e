-- +goose Up
-- One row per scheduled job (jobguard): taken while locked_until is ahead
-- of the database clock. Timestamps are microseconds since the Unix epoch;
-- owner is empty once the run released and only hold-at-least keeps it.
CREATE TABLE sqllock_jobs (
    name         TEXT    NOT NULL PRIMARY KEY,
    owner        TEXT    NOT NULL,
    locked_by    TEXT    NOT NULL,
    token        INTEGER NOT NULL,
    locked_at    INTEGER NOT NULL,
    locked_until INTEGER NOT NULL
);

-- +goose Down
DROP TABLE sqllock_jobs;
