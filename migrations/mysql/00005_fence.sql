-- +goose Up
-- The fence (package fence): one row per protected resource with the
-- largest fencing token a write to it has carried. A fenced write upserts
-- its token here in its own transaction and is refused when a larger one
-- is recorded. varbinary names compare byte for byte, as lock keys do.
CREATE TABLE sqllock_fence_tokens (
    resource   varbinary(255) NOT NULL PRIMARY KEY,
    last_token bigint         NOT NULL
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE sqllock_fence_tokens;
