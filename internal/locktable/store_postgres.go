package locktable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.Postgres, newPostgres) }

// postgresStore serves PostgreSQL: upserts that read the holder back in the
// same statement, tokens from sqllock_next_token (dialect.PostgresToken), and NOTIFY on the table's
// channel in the statements that free a key.
type postgresStore struct {
	statements
	q        struct{ take, takeFree, renew, release, releaseQuiet, releaseOwner, forceRelease, void, leave, audit, reap, notifyGrant string }
	channel  string // NOTIFY of a freed key to every listener
	call     string // with a Locker's id, the channel that calls it (dialect.CallChannel)
	announce bool   // Config.Notify
	fair     bool   // Config.Fair
	rows     seenRows
	pgx      pgxDirect
}

func newPostgres(n names, cfg Config) store {
	s := &postgresStore{channel: n.channel, call: n.call, announce: cfg.Notify, fair: cfg.Fair && cfg.Notify}
	s.pgx.off.Store(cfg.Unprepared)
	v := postgresVariant(cfg)
	text := func(name string) string { return postgresStatement(name, v, n.table) }
	s.q.take = text("take")
	s.q.takeFree = text("take_free")
	s.q.renew = text("renew")
	s.q.release = text("release")
	s.q.releaseQuiet = text("release_quiet")
	s.q.releaseOwner = text("release_owner")
	s.q.forceRelease = text("force_release")
	if s.fair {
		s.q.void = text("void")
	}
	if v == "fair" {
		// Its release (release.fair.sql) leaves a grant's calls to this.
		s.q.notifyGrant = text("notify_grant")
	}
	s.q.leave = text("leave")
	s.q.reap = text("reap")
	s.q.audit = text("audit")
	s.holder = text("holder")
	s.live = text("live")
	s.param = func(i int) string { return "$" + strconv.Itoa(i) }
	s.list = text("list")
	s.ddl = text("ddl")
	return s
}

// changed runs a statement that frees rows, and with Notify announces
// them (its last two parameters are the channels), and returns the rows
// it changed. It runs as an Exec either way: a SELECT's command tag counts
// the rows it returned, and an Exec has no Rows, whose cancellable context
// would cost a goroutine per release in database/sql.
func (s *postgresStore) changed(ctx context.Context, h handle, q string, args ...any) (int64, error) {
	if s.announce {
		args = append(args, s.channel, s.call)
	}
	return s.pgx.exec(ctx, h, q, args...)
}

func (s *postgresStore) take(ctx context.Context, h handle, c Claim) (Attempt, error) {
	var a Attempt
	var left int64
	args := []any{c.Key, c.Owner, c.Host, micros(c.TTL)}
	if s.announce {
		args = append(args, c.caller)
	}
	if s.fair {
		// The entry is (caller, window, owner, host).
		args = append(args, micros(c.Entry.Window))
	}
	if c.ExpectFree && s.rows.quiet(c.Key) {
		err := s.pgx.queryRow(ctx, h, s.q.takeFree, args, &a.Token)
		if err == nil {
			s.rows.saw(c.Key, false)
			return Attempt{Won: true, Token: a.Token, Holds: 1}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Attempt{Remaining: -1}, err
		}
	}
	dest := []any{&a.Won, &a.Token, &a.Holds, &a.Host, &left}
	if s.fair {
		above := int64(-1)
		if c.Accept {
			above = c.Above
		}
		args = append(args, above)
		dest = append(dest, &a.Queued)
	}
	err := s.pgx.queryRow(ctx, h, s.q.take, args, dest...)
	if errors.Is(err, sql.ErrNoRows) {
		// The holder's row is newer than this statement's snapshot.
		s.rows.saw(c.Key, true)
		return Attempt{Remaining: -1}, nil
	}
	if err == nil {
		s.rows.saw(c.Key, !a.Won)
	}
	a.Remaining = remaining(left)
	return a, err
}

func (s *postgresStore) leave(ctx context.Context, h handle, key string, e Entry) (int64, error) {
	return s.pgx.exec(ctx, h, s.q.leave, key, e.Caller, micros(e.Window), e.Owner, e.Host)
}

func (s *postgresStore) void(ctx context.Context, h handle, key, owner string, e Entry, token, above int64) (int64, error) {
	return s.changed(ctx, h, s.q.void, key, owner, token, above, e.Caller, micros(e.Window), e.Owner, e.Host)
}

func (s *postgresStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, time.Time, error) {
	sent := time.Now()
	n, err := s.pgx.exec(ctx, h, s.q.renew, key, owner, token, micros(ttl))
	return n, sent, err
}

func (s *postgresStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	if s.announce && s.rows.quiet(key) {
		n, err := s.pgx.exec(ctx, h, s.q.releaseQuiet, key, owner, token, micros(keep))
		if err != nil || n > 0 {
			return n, err
		}
		// Someone waits for the key (or the row is no longer ours): it
		// is not quiet, and the next releases of it go straight to the
		// announced statement instead of paying this round trip first.
		s.rows.saw(key, true)
	}
	if s.q.notifyGrant != "" {
		return s.releaseFair(ctx, h, key, owner, token, keep)
	}
	return s.changed(ctx, h, s.q.release, key, owner, token, micros(keep))
}

// releaseFair runs fair order's release and, in the same round trip but
// a transaction of its own, the statement that sends the calls of a
// grant it made (release.fair.sql says why). It returns the rows the
// release changed; the calls' statement can only lose a call, which
// costs its grantee the wait bound, so its error is not the release's.
func (s *postgresStore) releaseFair(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	var n int64
	ok, err := s.pgx.run(ctx, h, func(c *pgx.Conn) error {
		var err error
		n, err, _ = execThen(ctx, c, s.q.release, textArgs([]any{key, owner, token, micros(keep), s.channel, s.call}),
			s.q.notifyGrant, textArgs([]any{key, token}))
		return err
	})
	if !ok {
		// Not pgx's driver, where a fair Acquire is refused: the release
		// alone, and a grant's calls are lost.
		return s.changed(ctx, h, s.q.release, key, owner, token, micros(keep))
	}
	return n, err
}

func (s *postgresStore) releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error) {
	return s.changed(ctx, h, s.q.releaseOwner, key, owner)
}

func (s *postgresStore) forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error) {
	return s.changed(ctx, h, s.q.forceRelease, key, token)
}

func (s *postgresStore) forceReleaseTx(ctx context.Context, tx *sql.Tx, key string, token int64) (int64, error) {
	if !s.announce {
		return execTx(ctx, tx, s.q.forceRelease, key, token)
	}
	rows, err := tx.QueryContext(ctx, s.q.forceRelease, key, token, s.channel, s.call)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

func (s *postgresStore) audit(ctx context.Context, tx *sql.Tx, key string, token int64, table string, a Audit) (int64, error) {
	return execTx(ctx, tx, s.q.audit, key, token, table, a.Operator, a.Reason)
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
// on the call channel of the Table id, and hands heard each announcement
// and call, until ctx ends or the session fails; a call heard returns
// true for is announced on that session to every listener, and a grant
// heard returns true for is voided there (the row goes to the entry
// queued next). The session is discarded afterwards rather than returned
// to the pool still listening. It needs the pgx stdlib driver: with
// another it returns ErrCannotListen.
func (s *postgresStore) listen(ctx context.Context, db *sql.DB, id string, onReady func(), heard func(notice) bool) error {
	err := onPgx(ctx, db, func(c *pgx.Conn) error {
		mine := s.call + id
		listen := "LISTEN " + pgx.Identifier{s.channel}.Sanitize() + "; LISTEN " + pgx.Identifier{mine}.Sanitize()
		if _, err := c.Exec(ctx, listen); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		onReady()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			var no notice
			switch {
			case n.Channel == mine && strings.HasPrefix(n.Payload, "g"):
				var ok bool
				if no, ok = parseGrant(n.Payload); !ok {
					continue // not sqllock's
				}
			case n.Channel == mine && len(n.Payload) > callerLen:
				no = notice{key: n.Payload[callerLen:], callee: n.Payload[:callerLen]}
			case n.Channel == mine:
				continue // not sqllock's
			default:
				no = notice{key: n.Payload}
			}
			if heard(no) {
				q, args := "SELECT pg_notify($1, $2)", []any{s.channel, no.key}
				if no.grant {
					if s.q.void == "" {
						continue
					}
					e := no.entry
					q, args = s.q.void, []any{no.key, no.owner, no.token, int64(0), e.Caller, micros(e.Window), e.Owner, e.Host, s.channel, s.call}
				}
				if _, err := c.Exec(ctx, q, args...); err != nil {
					return errors.Join(err, driver.ErrBadConn)
				}
			}
		}
	})
	if errors.Is(err, errNotPgx) {
		return ErrCannotListen
	}
	return err
}

func (s *postgresStore) listenChannel() string { return s.channel }
