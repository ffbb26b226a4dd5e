package rowlease

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
	"github.com/sqllock/sqllock/internal/sqlutil"
)

func init() { register(sqllock.Postgres, newPostgres) }

// postgresStore serves PostgreSQL: upserts that read the holder back in the
// same statement, tokens from sqllock_next_token (sqlutil.PostgresToken), and NOTIFY on the table's
// channel in the statements that free a key.
type postgresStore struct {
	statements
	q        struct{ take, takeFree, renew, release, releaseQuiet, releaseOwner, forceRelease, void, leave, audit, reap string }
	channel  string // NOTIFY of a freed key to every listener
	call     string // with a Locker's id, the channel that calls it (sqlutil.CallChannel)
	announce bool   // Config.Notify
	fair     bool   // Config.Fair
	rows     seenRows
	pgx      pgxDirect
	// grantSync: a grant's commit waits for the WAL flush (not with
	// Config.AsyncCommit).
	grantSync bool
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
		// In fair order a claimant queues its entry ($5, a Grant entry),
		// and a release grants the row to the entry first in the queue:
		// the row names its owner, and called keeps the entry until the
		// grantee takes it as its own. accept: this claim is that
		// grantee's, asking after a refusal that saw a holder under a
		// smaller token ($6; -1 asks nothing), so the hold is the grant's
		// and is not counted again.
		free, accept := `t.expires_at <= now()`, `false`
		if s.fair {
			accept = `($6::bigint >= 0 AND t.owner = EXCLUDED.owner AND t.called = $5::text AND t.token > $6::bigint AND t.expires_at > now())`
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
		hold_count  = CASE WHEN ` + free + ` THEN 1 WHEN ` + accept + ` THEN t.hold_count WHEN t.owner = EXCLUDED.owner THEN t.hold_count + 1 ELSE t.hold_count END,
		acquired_at = CASE WHEN ` + free + ` THEN now() ELSE t.acquired_at END,
		expires_at  = CASE WHEN ` + take + ` THEN GREATEST(t.expires_at, EXCLUDED.expires_at) ELSE t.expires_at END,
		owner       = CASE WHEN ` + take + ` THEN EXCLUDED.owner ELSE t.owner END,
		host        = CASE WHEN ` + take + ` THEN EXCLUDED.host ELSE t.host END,
		wanted      = CASE WHEN ` + free + ` THEN false WHEN t.owner = EXCLUDED.owner THEN t.wanted
			WHEN ` + queue + ` THEN t.wanted ELSE true END,
		waiters     = CASE WHEN ` + take + ` THEN array_remove(t.waiters, $5::text)
			WHEN ` + queue + ` AND NOT $5::text = ANY(t.waiters) THEN t.waiters || $5::text ELSE t.waiters END`
		// The holder named, how long until the claim ends, and (in fair
		// order) whether the claimant's entry is queued now.
		queued, queuedGot := ``, ``
		if s.fair {
			s.q.take += `,
		called      = CASE WHEN ` + free + ` OR ` + accept + ` THEN '' ELSE t.called END`
			queued, queuedGot = `, $5::text = ANY(waiters)`, `, queued`
		}
		s.q.take += `
	WHERE CASE WHEN ` + take + ` THEN true
		ELSE set_config('synchronous_commit', 'off', true) = 'off' AND NOT ` + asked("t") + ` END
	RETURNING t.owner = $2 AS won, t.token, t.hold_count, t.host, t.expires_at, $5::text = ANY(t.waiters) AS queued
)
SELECT won, token, hold_count, CASE WHEN won THEN '' ELSE host END,
	CASE WHEN won THEN 0::bigint ELSE (extract(epoch FROM expires_at - now()) * 1000000)::bigint END` + queuedGot + ` FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint` + queued + `
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
	holds, owner := `hold_count - 1`, `CASE WHEN hold_count > 1 THEN owner ELSE '' END`
	// A freed row expires when its last hold began (plus keep), not at
	// this statement's now(): see the package doc.
	kept := `CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + $4 * interval '1 microsecond' END`
	release := `UPDATE ` + t + ` SET hold_count = ` + holds + `,
		owner      = ` + owner + `,
		expires_at = ` + kept
	held := `
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`
	// A grant is a take, and waits for its flush like one.
	s.grantSync = !cfg.AsyncCommit
	if s.announce {
		// The release's commit waits for its flush where it grants the
		// row or keeps it ($4 > 0), as above.
		sync := `$4::bigint <> 0`
		if cfg.AsyncCommit {
			sync = `false`
		}
		s.q.release = s.announced(`UPDATE `+t+` SET `+s.frees("hold_count <= 1", `acquired_at + $4 * interval '1 microsecond' <= now()`, holds, owner, kept)+syncFrom+held, 5, sync)
	} else {
		s.q.release = release + releaseFrom + held
	}
	// On a quiet key the release first runs without the queue and the
	// calls, and only where nobody waits: the row is neither marked nor
	// has anyone queued, read under its row lock (PostgreSQL rechecks the
	// WHERE on the row as the last update left it). A waiter that queued
	// before is seen, and the announced release runs after this one
	// changed nothing; one that tries after finds the key free.
	s.q.releaseQuiet = release + `,
		called     = CASE WHEN hold_count <= 1 THEN '' ELSE called END` + releaseFrom + held + ` AND NOT wanted AND cardinality(waiters) = 0`
	// These wait for their flush, as before grants, with AsyncCommit too.
	const durable = `true`
	freed := `CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END`
	s.q.releaseOwner = s.announced(`UPDATE `+t+` SET `+s.frees("hold_count <= 1", "true", holds, owner, freed)+syncFrom+`
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()`, 3, durable)
	s.q.forceRelease = s.announced(`UPDATE `+t+` SET `+s.frees("true", "true", "0", "''", "acquired_at")+syncFrom+`
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()`, 3, durable)
	if s.fair {
		// A grant nobody took as its own (its waiter gave up, or its
		// Locker closed) is given back like a release, which grants the
		// row to the entry queued next: the grant under token $4, or,
		// with $4 = 0, one under a token above $5 (a grant of the entry
		// its Locker holds under an older token is in use). Once taken
		// (accept) called no longer names the entry, and this changes
		// nothing.
		s.q.void = s.announced(`UPDATE `+t+` SET `+s.frees("hold_count <= 1", "true", holds, owner, freed)+syncFrom+`
	WHERE lock_key = $1 AND owner = $2 AND called = $3 AND (token = $4 OR ($4::bigint = 0 AND token > $5::bigint)) AND expires_at > now()`, 6, durable)
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

// syncFrom is the FROM clause of a statement made by announced: the
// session's synchronous_commit, which the statement keeps where its commit
// must wait for the WAL flush (set_config(..., true) in RETURNING lasts
// for its implicit transaction, and synchronous_commit is read at commit).
const syncFrom = ` FROM (SELECT current_setting('synchronous_commit') AS sc0) AS sc`

// The parts of a queue entry of a fair Locker (Grant.Entry, laid out by
// entry), read from waiters[1] before the update: the lease, the owner and
// the host. SQL counts from 1.
var (
	entryOwnerChars = `substr(waiters[1], ` + pos(callerLen+entryTTLLen) + `, ` + strconv.Itoa(entryOwnerLen) + `)::int`
	entryTTL        = `substr(waiters[1], ` + pos(callerLen) + `, ` + strconv.Itoa(entryTTLLen) + `)::bigint * interval '1 microsecond'`
	entryOwner      = `substr(waiters[1], ` + pos(entryHead) + `, ` + entryOwnerChars + `)`
	entryHost       = `substr(waiters[1], ` + pos(entryHead) + ` + ` + entryOwnerChars + `, substr(waiters[1], ` +
		pos(callerLen+entryTTLLen+entryOwnerLen) + `, ` + strconv.Itoa(entryHostLen) + `)::int)`
	// isEntry is true when e, a queued waiter, is a fair Locker's entry
	// rather than a Table's id.
	isEntry = func(e string) string { return `length(` + e + `) > ` + strconv.Itoa(callerLen) }
	// callee is the id of the Table whose waiter e is.
	callee = func(e string) string { return `left(` + e + `, ` + strconv.Itoa(callerLen) + `)` }
)

// pos is the SQL position of the character after the first n.
func pos(n int) string { return strconv.Itoa(n + 1) }

// frees is the SET list of a statement that gives holds back: holds, owner
// and expires are hold_count, owner and expires_at after it (each reading
// the row before the update). With announcements, a statement that leaves
// no hold (last) pops the first queued entry: a bare Locker id is called
// (announced), and a fair Locker's entry (longer: Grant) is *granted* the
// row when it is free at once (free): the entry's owner holds it, one
// hold, with a new token drawn under the row lock and the entry's lease
// from now, and called keeps the entry until the grantee takes the row as
// its own. Every right-hand side reads the row before the update.
func (s *postgresStore) frees(last, free, holds, owner, expires string) string {
	if !s.announce {
		return `hold_count = ` + holds + `, owner = ` + owner + `, expires_at = ` + expires
	}
	fair := isEntry(`waiters[1]`)
	g := `(` + last + ` AND ` + free + ` AND ` + fair + `)`
	// A fair entry stays queued while the row is kept (jobguard's
	// hold-at-least): its waiter looks when the row expires.
	pop := `(` + last + ` AND (waiters[1] IS NULL OR NOT ` + fair + ` OR ` + free + `))`
	return `hold_count = CASE WHEN ` + g + ` THEN 1 ELSE ` + holds + ` END,
		owner       = CASE WHEN ` + g + ` THEN ` + entryOwner + ` ELSE ` + owner + ` END,
		expires_at  = CASE WHEN ` + g + ` THEN now() + ` + entryTTL + ` ELSE ` + expires + ` END,
		host        = CASE WHEN ` + g + ` THEN ` + entryHost + ` ELSE host END,
		token       = CASE WHEN ` + g + ` THEN ` + sqlutil.PostgresToken + ` ELSE token END,
		acquired_at = CASE WHEN ` + g + ` THEN now() ELSE acquired_at END,
		called      = CASE WHEN ` + pop + ` THEN COALESCE(waiters[1], '') WHEN ` + last + ` THEN '' ELSE called END,
		waiters     = CASE WHEN ` + pop + ` THEN waiters[2:] ELSE waiters END`
}

// granted is true, on a row a statement made by frees left, when that
// statement granted it: only a grant sets acquired_at in such a statement,
// and now() is its transaction's start.
var granted = `(acquired_at = now() AND ` + isEntry(`called`) + `)`

// announced turns update, a statement that frees rows (with frees' SET
// items and syncFrom), into one that also wakes the waiters of each key it
// left with no hold: a key a refused claim marked wanted is announced on
// the channel, parameter $ch, to every listener; a key granted to an entry
// is announced to that entry's Locker, on its own channel ($ch+1 and its
// id), with the token and the entry (Grant), and copied to the two
// queued next, which look when the grant's lease ends (the grantee may be
// gone); otherwise the Locker popped from the queue is called alone on
// its own channel, and the call is copied to the two Lockers queued next,
// which look by themselves if the key is not taken within callGrace (the
// one called may be gone, and so may the first of them). Only those
// Lockers wake, not every listener (the server still signals every
// listening session of the database, which reads the queue and drops
// what is not its own). The NOTIFY rides in the same statement, one round
// trip, and is delivered only if it commits. A key nobody waits for is not
// announced: a transaction that queued a NOTIFY takes a database-wide lock
// at commit, which would queue every release behind every other. Its
// commit waits for the WAL flush where sync holds on a row it left, or it
// granted one (unless Config.AsyncCommit). Without announcements it is
// update itself.
func (s *postgresStore) announced(update string, ch int, sync string) string {
	if !s.announce {
		return update
	}
	if s.grantSync {
		sync = `(` + sync + `) OR ` + granted
	}
	all, one := "$"+strconv.Itoa(ch), "$"+strconv.Itoa(ch+1)
	const grant = `'g' || lpad(token::text, 20, '0') || called || lock_key`
	return `WITH r AS (
	` + update + `
	RETURNING lock_key, hold_count, wanted, called, token, waiters[1] AS next, waiters[2] AS after, ` + granted + ` AS granted,
		set_config('synchronous_commit', CASE WHEN ` + sync + ` THEN sc.sc0 ELSE 'off' END, true)
)
SELECT CASE WHEN granted THEN pg_notify(` + one + ` || ` + callee(`called`) + `, ` + grant + `)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify(` + one + ` || ` + callee(`next`) + `, ` + grant + `)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify(` + one + ` || ` + callee(`after`) + `, ` + grant + `)::text ELSE '' END
	WHEN hold_count > 0 THEN NULL
	WHEN wanted THEN pg_notify(` + all + `, lock_key)::text
	WHEN called <> '' THEN pg_notify(` + one + ` || called, called || lock_key)::text
		|| CASE WHEN next IS NOT NULL THEN pg_notify(` + one + ` || ` + callee(`next`) + `, called || lock_key)::text ELSE '' END
		|| CASE WHEN after IS NOT NULL THEN pg_notify(` + one + ` || ` + callee(`after`) + `, called || lock_key)::text ELSE '' END END FROM r`
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

func (s *postgresStore) leave(ctx context.Context, h handle, key, caller string) (int64, error) {
	return s.pgx.exec(ctx, h, s.q.leave, key, caller)
}

func (s *postgresStore) void(ctx context.Context, h handle, key, owner, entry string, token, above int64) (int64, error) {
	return s.changed(ctx, h, s.q.void, key, owner, entry, token, above)
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
		// Someone waits for the key (or the row is no longer ours): it
		// is not quiet, and the next releases of it go straight to the
		// announced statement instead of paying this round trip first.
		s.rows.saw(key, true)
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
					q, args = s.q.void, []any{no.key, no.owner, no.entry, no.token, int64(0), s.channel, s.call}
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
