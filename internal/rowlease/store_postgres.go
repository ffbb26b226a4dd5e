package rowlease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

func init() { register(sqllock.Postgres, newPostgres) }

// postgresStore serves PostgreSQL: upserts that read the holder back in the
// same statement, tokens from sqllock_next_token (sqlutil.PostgresToken), and NOTIFY on the table's
// channel in the statements that free a key.
type postgresStore struct {
	statements
	q        struct{ take, takeFree, renew, release, releaseQuiet, releaseOwner, forceRelease, passOn, leave, audit, reap string }
	channel  string // NOTIFY of a freed key to every listener
	call     string // with a Locker's id, the channel that calls it (sqlutil.CallChannel)
	announce bool   // Config.Notify
	fair     bool   // Config.Fair
	rows     seenRows
	pgx      pgxDirect
}

// maxQueued bounds a row's waiters: a Locker refused when the queue is
// full marks the row wanted instead, and is woken with everyone.
const maxQueued = 64

func newPostgres(n names, cfg Config) store {
	t := n.table
	s := &postgresStore{channel: n.channel, call: n.call, announce: cfg.Notify, fair: cfg.Fair && cfg.Notify}
	s.pgx.off.Store(cfg.Unprepared)
	from := ""
	values := `VALUES ($1, $2, $3, 1, ` + sqlutil.PostgresToken + `, now(), now() + $4 * interval '1 microsecond')`
	if cfg.AsyncCommit {
		// set_config(..., true) lasts for this statement's implicit
		// transaction; synchronous_commit is read at commit.
		from = noFlush
		values = `SELECT $1, $2, $3, 1, ` + sqlutil.PostgresToken + `, now(), now() + $4 * interval '1 microsecond'` + from
	}
	// The SET list sees the old row, so every CASE asks about the holder
	// before this statement. The token in SET is drawn after the row lock, so a
	// new holder's token is larger than any earlier holder's. When the
	// upsert takes nothing, the holder is read from the statement's
	// snapshot; a holder newer than the snapshot leaves no row at all.
	s.q.take = `WITH got AS (
	INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	` + values + `
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at > now() THEN t.token ELSE ` + sqlutil.PostgresToken + ` END,
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
	if s.announce {
		// Where releases are announced, a refused claim asks to be woken:
		// a waiting Locker that listens (Claim.Listening; $5 is its id)
		// joins the row's queue of waiters once, anyone else marks the row
		// wanted (once per holder: a row already marked is left alone),
		// and a new holder clears the mark and leaves the queue. The
		// release reads both under the row lock it takes: it announces a
		// wanted key to every listener, and otherwise calls the first
		// queued Locker alone and drops it from the queue. No wake-up is
		// lost: a waiter listens before it tries, and sleeps only after a
		// refusal that queued it (or found it queued), or marked the row
		// under the current holder; whoever frees the row afterwards
		// locks it after that commit and sees the queue and the mark. A
		// refusal returns the holder from the update itself, read after
		// the row lock.
		//
		// A refusal commits without waiting for its WAL flush (its CASE
		// branch alone turns synchronous_commit off, for this statement):
		// it changed nothing but the queue, the mark and its row lock, and
		// a crash that lost them also ends every waiter's listening
		// session, whose reconnection makes them all look again.
		//
		// A claim whose snapshot shows a live holder, another owner, with
		// the claimant already queued (or the row marked) proposes no row
		// at all, so it locks nothing, writes nothing and burns no token: a
		// read, like a raw poller's INSERT ... DO NOTHING. Skipping on a
		// snapshot loses no wake-up: a release after the snapshot calls
		// this Locker (or announces the key), and it listened before it
		// tried; a holder whose lease merely expired is retried at its
		// expiry, as before.
		// free: the row is free for this claimant. In fair order a row
		// freed by a release that called a queued Locker is promised to
		// it: free for it alone until callGrace after the release (on the
		// database clock), when the Lockers queued next look by
		// themselves. Every new holder clears the call, so an expired
		// row, whose holder never released it, is promised to nobody.
		free, until := `t.expires_at <= now()`, `expires_at`
		if s.fair {
			free = `(t.expires_at <= now() AND NOT ` + promised("t.") + `)`
			until = `CASE WHEN expires_at > now() THEN expires_at ELSE expires_at + ` + graceSQL + ` END`
		}
		take := `(` + free + ` OR t.owner = EXCLUDED.owner)`
		asked := func(r string) string {
			return `(` + r + `.wanted OR ($5::text <> '' AND $5::text = ANY(` + r + `.waiters)))`
		}
		queue := `($5::text <> '' AND cardinality(t.waiters) < ` + strconv.Itoa(maxQueued) + `)`
		proposed := `SELECT $1::varchar, $2::varchar, $3::varchar, 1, ` + sqlutil.PostgresToken + `, now(), now() + $4 * interval '1 microsecond'` + from + `
	WHERE NOT EXISTS (SELECT 1 FROM ` + t + ` AS w
		WHERE w.lock_key = $1::varchar AND ` + asked("w") + ` AND w.expires_at > now() AND w.owner <> $2::varchar)`
		s.q.take = `WITH got AS (
	INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	` + proposed + `
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN ` + free + ` THEN ` + sqlutil.PostgresToken + ` ELSE t.token END,
		hold_count  = CASE WHEN ` + free + ` THEN 1 WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1 ELSE t.hold_count END,
		acquired_at = CASE WHEN ` + free + ` THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN ` + take + ` THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN ` + take + ` THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN ` + take + ` THEN EXCLUDED.host ELSE t.host END,
		wanted      = CASE WHEN ` + free + ` THEN false WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN ` + queue + ` THEN t.wanted ELSE true END,
		waiters     = CASE WHEN ` + take + ` THEN array_remove(t.waiters, $5::text)
			WHEN ` + queue + ` AND NOT $5::text = ANY(t.waiters) THEN t.waiters || $5::text ELSE t.waiters END`
		// The holder named, how long until the claim ends, and (in fair
		// order) whether it is a promise: a refusal on a free row.
		host, promise, promiseGot := `host`, ``, ``
		if s.fair {
			s.q.take += `,
		called      = CASE WHEN ` + free + ` THEN '' ELSE t.called END`
			host = `CASE WHEN expires_at <= now() THEN '' ELSE host END`
			promise, promiseGot = `, expires_at <= now()`, `, NOT won AND expires_at <= now()`
		}
		s.q.take += `
	WHERE CASE WHEN ` + take + ` THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off' AND NOT ` + asked("t") + ` END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at
)
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE ` + host + ` END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM ` + until + ` - now()) * 1000000)::bigint END` + promiseGot + ` FROM got
UNION ALL
SELECT false, token, hold_count, ` + host + `, (extract(epoch FROM ` + until + ` - now()) * 1000000)::bigint` + promise + `
FROM ` + t + ` WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)`
	}
	// A claim that expects the key free, on a quiet key whose row this
	// store saw lately (seenRows), tries a plain UPDATE of a free row
	// first: it costs the server less than the upsert (no proposed row,
	// so one token drawn, not two; no probe of the queue). PostgreSQL
	// draws the token again, under the row lock, when a concurrent update
	// made it recheck the row. A new holder clears the mark and leaves the
	// queue, as in the upsert. A row that is absent, held, or already the
	// claimant's is left to the upsert, which queues a refused claimant:
	// no wake-up is lost.
	free := `token = ` + sqlutil.PostgresToken + `, hold_count = 1, acquired_at = now(),
	expires_at = now() + $4 * interval '1 microsecond', owner = $2, host = $3`
	if s.announce {
		free += `, wanted = false, waiters = array_remove(waiters, $5::text)`
	}
	whereFree := `expires_at <= now()`
	if s.fair {
		free += `, called = ''`
		whereFree += ` AND NOT ` + promised("")
	}
	s.q.takeFree = `UPDATE ` + t + ` SET ` + free + from + `
WHERE lock_key = $1 AND ` + whereFree + ` RETURNING token`
	s.q.renew = `UPDATE ` + t + ` SET expires_at = GREATEST(expires_at, now() + $4 * interval '1 microsecond')` + from + `
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`
	// A release that keeps nothing ($4 = 0) commits without waiting for
	// its WAL flush. Losing it in a server crash only leaves the key held
	// until its expiry, as the holder had it; whoever takes the key next
	// commits after it, and that durable commit flushes the release too.
	// A release that keeps the key for a while (jobguard's hold-at-least)
	// stays durable: lost, the row would expire before the promised time.
	releaseFrom := ` FROM (SELECT CASE WHEN $4::bigint = 0 THEN set_config('synchronous_commit', 'off', true) END) AS sc`
	if cfg.AsyncCommit {
		releaseFrom = from
	}
	release := `UPDATE ` + t + ` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE GREATEST(acquired_at + $4 * interval '1 microsecond', now()) END`
	held := `
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`
	s.q.release = s.announced(release+s.pop("hold_count <= 1")+releaseFrom+held, 5)
	// On a quiet key the release first runs without the queue and the
	// calls, and only where nobody waits: the row is neither marked nor
	// has anyone queued, read under its row lock (PostgreSQL rechecks the
	// WHERE on the row as the last update left it). A waiter that queued
	// before is seen, and the announced release runs after this one
	// changed nothing; one that tries after finds the key free.
	s.q.releaseQuiet = release + `,
		called     = CASE WHEN hold_count <= 1 THEN '' ELSE called END` + releaseFrom + held + ` AND NOT wanted AND cardinality(waiters) = 0`
	s.q.releaseOwner = s.announced(`UPDATE `+t+` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE now() END`+s.pop("hold_count <= 1")+`
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()`, 3)
	s.q.forceRelease = s.announced(`UPDATE `+t+` SET hold_count = 0, owner = '', expires_at = now()`+s.pop("true")+`
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()`, 3)
	if s.fair {
		// A called Locker that has no waiter left for the key passes its
		// turn to the Locker queued next, as the release would have, and
		// the promise starts again: the others need not wait for it to
		// run out, and keep their order. It changes only the queue and
		// the call, so it does not wait for its WAL flush.
		s.q.passOn = s.announced(`UPDATE `+t+` SET expires_at = now()`+s.pop("true")+noFlush+`
	WHERE lock_key = $1 AND called = $2 AND expires_at <= now()`, 3)
	}
	// A Locker that no longer waits leaves the queue. It changes only the
	// queue, so it does not wait for its WAL flush either.
	s.q.leave = `UPDATE ` + t + ` SET waiters = array_remove(waiters, $2::text)` + noFlush + `
	WHERE lock_key = $1 AND $2::text = ANY(waiters)`
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
	s.q.audit = `INSERT INTO ` + AuditTable + ` (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT now(), '` + ActionForceRelease + `', $3, lock_key, token, owner, host, hold_count, $4, $5
FROM ` + t + ` WHERE lock_key = $1 AND token = $2 AND expires_at > now() FOR UPDATE`
	s.holder = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = $1 AND expires_at > now()`
	s.live = `SELECT lock_key FROM ` + t + ` WHERE expires_at > now() AND lock_key IN (`
	s.param = func(i int) string { return "$" + strconv.Itoa(i) }
	s.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	(extract(epoch FROM now() - acquired_at) * 1000000)::bigint
FROM ` + t + ` WHERE expires_at > now() ORDER BY lock_key`
	// No index on expires_at and half-full pages: every take and release
	// writes expires_at, and only then can such an update be HOT, written
	// to the heap page alone (migration 00012).
	s.ddl = `CREATE TABLE ` + t + ` (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL,
    wanted      boolean      NOT NULL DEFAULT false,
    waiters     text[]       NOT NULL DEFAULT '{}',
    called      text         NOT NULL DEFAULT ''
) WITH (fillfactor = 50);`
	return s
}

// noFlush is the FROM clause of an UPDATE that commits without waiting
// for its WAL flush: set_config(..., true) lasts for the statement's
// implicit transaction, and synchronous_commit is read at commit.
const noFlush = ` FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc`

// graceSQL is callGrace as an interval.
var graceSQL = `interval '` + strconv.FormatInt(callGrace.Microseconds(), 10) + ` microseconds'`

// promised is the condition, in fair order, that a free row (its columns
// prefixed with r) is promised to another claimant than $5: its release
// called a Locker, less than callGrace ago.
func promised(r string) string {
	return `(` + r + `called <> '' AND ` + r + `called <> $5::text AND now() < ` + r + `expires_at + ` + graceSQL + `)`
}

// pop is the SET items of a statement that frees a row when last holds:
// it moves the first queued waiter to called, or leaves called empty.
// Both right-hand sides read the row before the update.
func (s *postgresStore) pop(last string) string {
	if !s.announce {
		return ""
	}
	return `,
		called     = CASE WHEN ` + last + ` THEN COALESCE(waiters[1], '') ELSE called END,
		waiters    = CASE WHEN ` + last + ` THEN waiters[2:] ELSE waiters END`
}

// announced turns update, a statement that frees rows (with pop's SET
// items), into one that also wakes the waiters of each key it left with
// no hold: a key a refused claim marked wanted is announced on the
// channel, parameter $ch, to every listener; otherwise the waiter popped
// from the queue is called alone on its own channel ($ch+1 and its id),
// and the call is copied to the two Lockers queued next, which look by
// themselves if the key is not taken within callGrace (the one called may
// be gone, and so may the first of them). Only those three sessions and
// Lockers wake, not every listener. The NOTIFY rides in the same
// statement, one round trip, and is delivered only if it commits. A key
// nobody waits for is not announced: a transaction that queued a NOTIFY
// takes a database-wide lock at commit, which would queue every release
// behind every other. Without announcements it is update itself.
func (s *postgresStore) announced(update string, ch int) string {
	if !s.announce {
		return update
	}
	all, one := "$"+strconv.Itoa(ch), "$"+strconv.Itoa(ch+1)
	return `WITH r AS (
	` + update + `
	RETURNING lock_key, hold_count, wanted, called, waiters[1] AS next, waiters[2] AS after
)
SELECT CASE WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify(` + all + `, lock_key)::text
	WHEN called <> '' THEN pg_notify(` + one + ` || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify(` + one + ` || next, called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify(` + one + ` || after, called || lock_key)::text ELSE '' END END FROM r`
}

// changed runs a statement made by announced and returns the rows it
// changed. It runs as an Exec either way: a SELECT's command tag counts the
// rows it returned, and an Exec has no Rows, whose cancellable context
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
		dest = append(dest, &a.Promised)
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

func (s *postgresStore) leave(ctx context.Context, h handle, key, caller string) (int64, error) {
	return s.pgx.exec(ctx, h, s.q.leave, key, caller)
}

func (s *postgresStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, error) {
	return s.pgx.exec(ctx, h, s.q.renew, key, owner, token, micros(ttl))
}

func (s *postgresStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	if s.announce && s.rows.quiet(key) {
		n, err := s.pgx.exec(ctx, h, s.q.releaseQuiet, key, owner, token, micros(keep))
		if err != nil || n > 0 {
			return n, err
		}
	}
	return s.changed(ctx, h, s.q.release, key, owner, token, micros(keep))
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
// true for is announced on that session to every listener (in fair order,
// passed on to the Locker queued next). The session is
// discarded afterwards rather than returned to the pool still listening. It needs the pgx stdlib driver: with another
// it returns ErrCannotListen.
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
			case n.Channel == mine && len(n.Payload) > callerLen:
				no = notice{key: n.Payload[callerLen:], callee: n.Payload[:callerLen]}
			case n.Channel == mine:
				continue // not sqllock's
			default:
				no = notice{key: n.Payload}
			}
			if heard(no) {
				q, args := "SELECT pg_notify($1, $2)", []any{s.channel, no.key}
				if s.fair {
					q, args = s.q.passOn, []any{no.key, id, s.channel, s.call}
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
