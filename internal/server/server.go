// Package server holds what a Locker on a MySQL-family server learns of
// it before its first statement: which server answers (MySQL or MariaDB,
// a Galera node), whether the token function is migrated, and whether the
// MariaDB path's sequence has caught up with the MySQL path's tickets.
// Each Locker keeps its own Check, so what it learns lives and dies with
// it; on PostgreSQL and SQLite there is none, and a take asks nothing.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
)

// Check is one Locker's knowledge of its server. Its zero value is not
// usable; a nil *Check, which New returns for a dialect that probes
// nothing, checks nothing.
type Check struct {
	db           *sql.DB
	d            sqllock.Dialect
	singleWriter bool

	ok     atomic.Bool // every check passed: nothing more to ask
	mu     sync.Mutex  // one probe at a time: a burst of first takes asks once
	srv    *sqllock.Server
	probes int  // times the server was read, for tests
	ready  bool // the token source is there (MySQL) or caught up (MariaDB)
}

// New returns the Check of a Locker on db for d, or nil when d's
// guarantees do not depend on the server (dialect.Caps.ProbesServer).
// singleWriter is the Locker's declaration that every lock statement
// reaches one node of a Galera cluster.
func New(db *sql.DB, d sqllock.Dialect, singleWriter bool) *Check {
	if !dialect.Of(d).ProbesServer {
		return nil
	}
	return &Check{db: db, d: d, singleWriter: singleWriter}
}

// WithSingleWriter returns an option that sets the single-writer
// declaration at returns: the body of every strategy's WithSingleWriter.
func WithSingleWriter[C any](on bool, at func(*C) *bool) func(*C) error {
	return func(c *C) error {
		*at(c) = on
		return nil
	}
}

// Probes returns how many times c read its server: at most once for the
// Check's life once a read succeeded.
func (c *Check) Probes() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes
}

// Check returns nil when the dialect's guarantees hold on the server, and
// otherwise an error that says why and what to do (matching
// sqllock.ErrUnsupported where the server cannot serve the dialect). It
// reads the server at its first call and keeps the answer; an error is not
// kept, so the next call asks again.
//
// On MariaDB outside Galera the MariaDB dialect first draws one token
// through sqllock_next_token(), before the Locker's first token: see
// catchUp.
//
// A Galera node of a multi-writer cluster is refused unless the Locker was
// made with the single-writer option: GET_LOCK and FOR UPDATE are each
// node's own, so two nodes grant one key to two holders, and
// AUTO_INCREMENT tickets of different nodes are not in one order, so
// tokens would go back. Galera has no sequences either (CREATE SEQUENCE
// fails with error 1235): the MariaDB dialect is refused there for MySQL.
func (c *Check) Check(ctx context.Context) error {
	if c == nil || c.ok.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok.Load() {
		return nil
	}
	if c.srv == nil {
		c.probes++
		s, err := sqllock.DetectServer(ctx, c.db)
		if err != nil {
			return notAcquired(ctx, err)
		}
		c.srv = &s
	}
	s := *c.srv
	caps := dialect.Of(c.d)
	if s.Galera && caps.Sequences {
		return fmt.Errorf("%w: a Galera node has no sequences, which the MariaDB dialect needs: use sqllock.MySQL (sqllock.ServerDialect picks it)", sqllock.ErrUnsupported)
	}
	if !c.ready {
		var err error
		switch {
		case caps.TicketTokens:
			c.ready, err = c.checkTickets(ctx)
		case s.MariaDB:
			c.ready, err = c.catchUp(ctx)
		default:
			c.ready = true
		}
		if err != nil {
			return err
		}
	}
	if s.MultiWriter() && !c.singleWriter {
		return fmt.Errorf("%w: this is a multi-writer Galera cluster (wsrep_on, %d nodes): locks taken on one node do not exclude holders on another, and fencing tokens are not monotonic across nodes. "+
			"Route every lock statement to one node (a single-writer proxy, or one node's address) and declare it with the strategy's WithSingleWriter option", sqllock.ErrUnsupported, s.ClusterSize)
	}
	c.ok.Store(c.ready)
	return nil
}

// notAcquired joins the end of ctx to sqllock.ErrNotAcquired when ctx
// ended, and returns err otherwise.
func notAcquired(ctx context.Context, err error) error {
	if cerr := ctxend.Err(ctx); cerr != nil {
		return errors.Join(sqllock.ErrNotAcquired, cerr)
	}
	return err
}

// checkTickets makes sure migration 00010 ran before the MySQL path's
// first statement, which would otherwise fail on a function it cannot
// name; it reports whether it found it. information_schema shows a user
// only the routines it holds a privilege on, so a user without EXECUTE
// finds none either: the error says both.
func (c *Check) checkTickets(ctx context.Context) (bool, error) {
	var n int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'sqllock_next_token'`).Scan(&n); err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return false, errors.Join(sqllock.ErrNotAcquired, cerr)
		}
		return false, fmt.Errorf("sqllock: looking for sqllock_next_token: %w", err)
	}
	if n == 0 {
		return false, errors.New("sqllock: the database has no sqllock_next_token() this user may execute, the MySQL path's token source: " +
			"run migrations.Up (or `sqllock migrate up`) to apply migration 00010, or GRANT EXECUTE ON FUNCTION sqllock_next_token to the user")
	}
	return true, nil
}

// catchUp draws one token through sqllock_next_token() before the MariaDB
// path's first token, and reports whether it did. Its statements draw
// NEXTVAL alone, and tickets can be ahead of the sequence: drawn on a
// Galera node the server has since left, or by 00010's function (a replica
// of an older release during the upgrade to 00015). Since 00015 the
// function draws NEXTVAL past a new ticket, so afterwards the sequence is
// above every ticket handed out before. A user without EXECUTE on the
// function gets an error, not a lock whose token might go back.
func (c *Check) catchUp(ctx context.Context) (bool, error) {
	var tok int64
	if err := c.db.QueryRowContext(ctx, "SELECT sqllock_next_token()").Scan(&tok); err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return false, errors.Join(sqllock.ErrNotAcquired, cerr)
		}
		// A database migrated below 00010 has no MySQL path, so no token
		// of that path to rise above. Not kept: once migrated, the next
		// take catches up.
		if dberr.IsMissingRoutine(err) {
			return false, nil
		}
		return false, fmt.Errorf("sqllock: raising the sequence above the MySQL path's tokens with sqllock_next_token(): %w; "+
			"run migrations.Up (or `sqllock migrate up`) if the function is missing, and GRANT EXECUTE ON FUNCTION sqllock_next_token to the user: "+
			"the MariaDB path needs it too, or its tokens could go back after a move from the MySQL path or Galera", err)
	}
	return true, nil
}
