-- A grant's calls, fair order: sent in the same round trip as the
-- release (release.fair.sql), in a transaction of its own, after the
-- release's commit. $1 the key, $2 the releaser's token: the calls the
-- release left in the session are sent only if that release left them,
-- and cleared either way (read first: a subquery's outputs are evaluated
-- in order, and OFFSET 0 keeps it whole and every output in it). Its
-- commit does not wait for its WAL flush: it writes nothing but the
-- calls, so it holds the lock that serializes notifying commits only for
-- as long as the commit takes.
SELECT CASE WHEN s.calls ->> 'key' = $1 AND (s.calls ->> 'released')::bigint = $2::bigint
		THEN (SELECT count(pg_notify(c, s.calls ->> 'payload')) FROM json_array_elements_text(s.calls -> 'channels') AS c)
		ELSE 0 END
	FROM (SELECT nullif(current_setting('sqllock.calls', true), '')::json AS calls,
			set_config('sqllock.calls', '', false) AS cleared,
			set_config('synchronous_commit', 'off', true) AS sc
		OFFSET 0) AS s
