-- +goose Up
-- The fence (package fence): one row per protected resource with the
-- largest fencing token a write to it has carried. A fenced write upserts
-- its token here in its own transaction and is refused when a larger one
-- is recorded.
CREATE TABLE sqllock_fence_tokens (
    resource   varchar(255) NOT NULL PRIMARY KEY,
    last_token bigint       NOT NULL
);

-- +goose Down
DROP TABLE sqllock_fence_tokens;
