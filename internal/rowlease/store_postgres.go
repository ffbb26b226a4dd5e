package rowlease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.Postgres, newPostgres) }

// postgresStore serves PostgreSQL: upserts that read the holder back in the
// same statement, tokens from sqllock_fence_seq, and NOTIFY on the table's
// channel in the statements that free a key.
type postgresStore struct {
	statements
	q        struct{ take, renew, release, releaseOwner, forceRelease, reap string }
	channel  string
	announce bool // Config.Notify
}

func newPostgres(n names, cfg Config) store {
	t := n.table
	s := &postgresStore{channel: n.channel, announce: cfg.Notify}
	from := ""
	values := `VALUES ($1, $2, $3, 1, nextval('sqllock_fence_seq'), now(), now() + $4 * interval '1 microsecond')`
	if cfg.AsyncCommit {
		// set_config(..., true) lasts for this statement's implicit
		// transaction; synchronous_commit is read at commit.
		from = ` FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc`
		values = `SELECT $1, $2, $3, 1, nextval('sqllock_fence_seq'), now(), now() + $4 * interval '1 microsecond'` + from
	}
	// The SET list sees the old row, so every CASE asks about the holder
	// before this statement. nextval in SET runs after the row lock, so a
	// new holder's token is larger than any earlier holder's. When the
	// upsert takes nothing, the holder is read from the statement's
	// snapshot; a holder newer than the snapshot leaves no row at all.
	s.q.take = `WITH got AS (
	INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	` + values + `
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at > now() THEN t.token ELSE nextval('sqllock_fence_seq') END,
		hold_count  = CASE WHEN t.expires_at > now() THEN t.hold_count + 1 ELSE 1 END,
		acquired_at = CASE WHEN t.expires_at > now() THEN t.acquired_at ELSE now() END,
		expires_at  = GREATEST(t.expires_at, EXCLUDED.expires_at),
		owner       = EXCLUDED.owner,
		host        = EXCLUDED.host
	WHERE t.expires_at <= now() OR t.owner = EXCLUDED.owner
	RETURNING t.token, t.hold_count
)
SELECT true, token, hold_count, '', 0::bigint FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)`
	s.q.renew = `UPDATE ` + t + ` SET expires_at = now() + $4 * interval '1 microsecond'` + from + `
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`
	s.q.release = s.announced(`UPDATE `+t+` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE GREATEST(acquired_at + $4 * interval '1 microsecond', now()) END`+from+`
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`, "$5")
	s.q.releaseOwner = s.announced(`UPDATE `+t+` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE now() END
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()`, "$3")
	s.q.forceRelease = s.announced(`UPDATE `+t+` SET hold_count = 0, owner = '', expires_at = now()
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()`, "$3")
	// SKIP LOCKED: a row being taken over right now is left for the next
	// sweep instead of blocking it. Keys whose holder never released
	// (owner still set) are announced.
	notified := `0::bigint`
	if s.announce {
		notified = `count(pg_notify($3, lock_key)) FILTER (WHERE owner <> '')`
	}
	s.q.reap = `WITH d AS (
	DELETE FROM ` + t + ` WHERE lock_key IN (
		SELECT lock_key FROM ` + t + `
		WHERE expires_at < now() - $1 * interval '1 microsecond'
		LIMIT $2 FOR UPDATE SKIP LOCKED)
	AND expires_at < now() - $1 * interval '1 microsecond'
	RETURNING lock_key, owner
)
SELECT count(*), ` + notified + ` FROM d`
	s.holder = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = $1 AND expires_at > now()`
	s.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	(extract(epoch FROM now() - acquired_at) * 1000000)::bigint
FROM ` + t + ` WHERE expires_at > now() ORDER BY lock_key`
	s.ddl = `CREATE TABLE ` + t + ` (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL
);
CREATE INDEX ` + n.index + ` ON ` + t + ` (expires_at);`
	return s
}

// announced turns update, a statement that frees rows, into one that also
// announces each key it left with no hold on the channel, parameter ch: the
// NOTIFY rides in the same statement, one round trip, and is delivered only
// if it commits. Without announcements it is update itself.
func (s *postgresStore) announced(update, ch string) string {
	if !s.announce {
		return update
	}
	return `WITH r AS (
	` + update + `
	RETURNING lock_key, hold_count
)
SELECT CASE WHEN hold_count = 0 THEN pg_notify(` + ch + `, lock_key)::text END FROM r`
}

// changed runs a statement made by announced and returns the rows it
// changed: the rows it returned, or the affected-row count.
func (s *postgresStore) changed(ctx context.Context, h handle, q string, args ...any) (int64, error) {
	if !s.announce {
		return h.exec(ctx, q, args...)
	}
	return h.count(ctx, q, append(args, s.channel)...)
}

func (s *postgresStore) take(ctx context.Context, h handle, c Claim) (Attempt, error) {
	var a Attempt
	var left int64
	err := h.queryRow(ctx, s.q.take, []any{c.Key, c.Owner, c.Host, micros(c.TTL)}, &a.Won, &a.Token, &a.Holds, &a.Host, &left)
	if errors.Is(err, sql.ErrNoRows) {
		// The holder's row is newer than this statement's snapshot.
		return Attempt{Remaining: -1}, nil
	}
	a.Remaining = remaining(left)
	return a, err
}

func (s *postgresStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, error) {
	return h.exec(ctx, s.q.renew, key, owner, token, micros(ttl))
}

func (s *postgresStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	return s.changed(ctx, h, s.q.release, key, owner, token, micros(keep))
}

func (s *postgresStore) releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error) {
	return s.changed(ctx, h, s.q.releaseOwner, key, owner)
}

func (s *postgresStore) forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error) {
	return s.changed(ctx, h, s.q.forceRelease, key, token)
}

func (s *postgresStore) reap(ctx context.Context, db *sql.DB, grace time.Duration, batch int) (int64, error) {
	args := []any{micros(grace), batch}
	if s.announce {
		args = append(args, s.channel)
	}
	var n, notified int64
	err := db.QueryRowContext(ctx, s.q.reap, args...).Scan(&n, &notified)
	return n, err
}

// listen holds one session of db that LISTENs on the table's channel and
// calls wake with each key announced, until ctx ends or the session fails.
// The session is discarded afterwards rather than returned to the pool
// still listening. It needs the pgx stdlib driver: with another it returns
// errCannotListen.
func (s *postgresStore) listen(ctx context.Context, db *sql.DB, onReady func(), wake func(key string)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errCannotListen
		}
		c := pc.Conn()
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		onReady()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			wake(n.Payload)
		}
	})
}

func (s *postgresStore) listenChannel() string { return s.channel }
