-- +goose Up
-- A take bumps the fence row through these triggers, in the statement that
-- draws its token, rather than in a transaction of its own with a second
-- statement: BEGIN, the bump and COMMIT cost a take more than its upsert.
-- And the lock tables lose their index on expires_at: every take and
-- release moves the expiry, and the index cost two page writes more per
-- acquire and release; the reaper and List read the table through. A lock
-- table made by CreateTable has the same shape.
DROP INDEX sqllock_locks_expires_at;
DROP INDEX sqllock_jobs_expires_at;
-- +goose StatementBegin
CREATE TRIGGER sqllock_locks_token_in AFTER INSERT ON sqllock_locks BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sqllock_locks_token_up AFTER UPDATE OF token ON sqllock_locks WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sqllock_jobs_token_in AFTER INSERT ON sqllock_jobs BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sqllock_jobs_token_up AFTER UPDATE OF token ON sqllock_jobs WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER sqllock_jobs_token_up;
DROP TRIGGER sqllock_jobs_token_in;
DROP TRIGGER sqllock_locks_token_up;
DROP TRIGGER sqllock_locks_token_in;
CREATE INDEX sqllock_jobs_expires_at ON sqllock_jobs (expires_at);
CREATE INDEX sqllock_locks_expires_at ON sqllock_locks (expires_at);
