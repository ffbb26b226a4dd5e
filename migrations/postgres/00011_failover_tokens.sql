-- +goose Up
-- Fencing tokens that never go backwards across a failover. A promoted
-- standby's sequence can stand below values the old primary handed out
-- (nextval is WAL-logged 32 values ahead, and an asynchronous standby misses
-- whatever it had not received), so the sequence alone reissues tokens. The
-- token therefore carries the server's timeline id in its high bits:
--
--     token = timeline << 40 | nextval('sqllock_fence_seq')
--
-- A promotion always moves to a new, larger timeline, and a server takes
-- writes on one timeline only, so every token of a new primary is larger
-- than every token of the one it replaced, whatever its sequence says.
-- The timeline is the one WAL is being written on (the first eight hex
-- digits of the current WAL file name): pg_control_checkpoint() shows the
-- last checkpoint's, which after a promotion stays on the old timeline until
-- the end-of-recovery checkpoint completes, so it is not used. Both
-- functions are executable by PUBLIC: an application role needs only USAGE
-- on the sequence and EXECUTE on this function (PUBLIC by default).
--
-- 40 bits of counter (10^12 tokens a timeline) and 23 of timeline keep the
-- token a positive bigint; past either the function refuses with an error
-- rather than hand out a token that could go backwards. Tokens drawn before
-- this migration are plain sequence values, below 2^40: all smaller.
--
-- With the setting sqllock.require_sync_replica = on (ALTER DATABASE or
-- ALTER ROLE ... SET, the operator's choice) it also refuses to hand out a
-- token, and so to take a lock, where a commit does not wait for a
-- synchronous standby (synchronous_standby_names empty, or synchronous_commit
-- off or local, as tablelock's WithAsyncCommit sets it): a lock row taken
-- there could be missing after a failover.
-- +goose StatementBegin
CREATE FUNCTION sqllock_next_token() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n  bigint := nextval('sqllock_fence_seq');
    tl bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
BEGIN
    IF lower(coalesce(current_setting('sqllock.require_sync_replica', true), '')) IN ('on', 'true', 'yes', '1')
       AND (current_setting('synchronous_standby_names') = ''
            OR current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply')) THEN
        RAISE EXCEPTION 'sqllock: sqllock.require_sync_replica is on but this commit would not wait for a synchronous standby (synchronous_standby_names %, synchronous_commit %): a lock taken now could be lost in a failover',
            quote_literal(current_setting('synchronous_standby_names')), current_setting('synchronous_commit')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF n >= 1099511627776 OR tl >= 8388608 THEN
        RAISE EXCEPTION 'sqllock: fencing token out of range: sequence sqllock_fence_seq at %, timeline %', n, tl
            USING HINT = 'tokens are timeline << 40 | sequence value; the sequence must stay below 2^40 and the timeline below 2^23';
    END IF;
    RETURN tl << 40 | n;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Tokens fall back to the bare sequence, below every token drawn since.
DROP FUNCTION sqllock_next_token;
