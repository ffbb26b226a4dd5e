-- +goose Up
-- The fence (package fence): one row per protected resource with the
-- largest fencing token a write to it has carried. A fenced write upserts
-- its token here in its own transaction and is refused when a larger one
-- is recorded. (sqllock_fence, from 00001, is the token counter.)
CREATE TABLE sqllock_fence_tokens (
    resource   TEXT    NOT NULL PRIMARY KEY,
    last_token INTEGER NOT NULL
);

-- +goose Down
DROP TABLE sqllock_fence_tokens;
