-- +goose Up
-- sqllock_next_token (migrations 00011, 00014) without its timeline: the
-- sequence value, refused where sqllock_next_token refuses. For a caller
-- that holds one server session and knows its timeline (advisory's pinned
-- sessions take it from their first token) and joins timeline << 40 |
-- value itself: the timeline can change only when a server leaves
-- recovery, which no session that has drawn a token lives through, so
-- reading it again for every token only costs (two WAL position reads
-- and file names per token, as the expression evaluates it twice).
--
--   - with sqllock.require_sync_replica on and commits that would not wait
--     for a synchronous standby, sqllock_refuse_token raises the same
--     error (SQLSTATE 55000) before the sequence moves;
--   - on a standby nextval refuses (a read-only transaction);
--   - a sequence past 2^40 is refused by its MAXVALUE (migration 00014).
--
-- One SQL expression, inlined into the calling statement like
-- sqllock_next_token.
-- +goose StatementBegin
CREATE FUNCTION sqllock_next_token_counter() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
SELECT CASE
    WHEN lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
         AND (current_setting('synchronous_standby_names') = ''
              OR current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply'))
        THEN sqllock_refuse_token('sync')
    ELSE nextval('sqllock_fence_seq')
END
$$;
-- +goose StatementEnd
GRANT EXECUTE ON FUNCTION sqllock_next_token_counter() TO PUBLIC;

-- +goose Down
DROP FUNCTION sqllock_next_token_counter;
