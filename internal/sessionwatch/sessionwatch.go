// Package sessionwatch tells a lease at once when the server closes the
// session that holds it: a server-side kill (pg_terminate_backend), a
// crash, a restart. PostgreSQL sends the terminated client an error and
// closes the socket; the kernel then marks the socket's peer side shut
// (EPOLLRDHUP on Linux) within microseconds, long before any periodic
// check would run a query.
//
// The socket is watched, never read: one epoll instance per process,
// waited on through the Go runtime's poller, registers the pinned
// connections' sockets for the peer's close only. Statements on the
// connection, which read and write the same socket, are not disturbed and
// pay nothing; the watch costs no query and no goroutine per connection.
//
// Watching needs the connection's socket: it works for database/sql
// connections of github.com/jackc/pgx/v5/stdlib on Linux. Elsewhere Conn
// returns nil and the caller's periodic check is the only detector.
// A silent network partition closes nothing either; that too is left to
// the periodic check.
package sessionwatch

import (
	"bytes"
	"database/sql"
	"net"

	"github.com/jackc/pgx/v5"
)

// Conn watches the socket of c, a pinned connection, and calls fn once,
// from the watcher's goroutine, when the server closes or resets it. fn
// must not block for long: it delays the report of other connections'
// losses. It returns nil when c's socket cannot be watched (another
// driver, another OS). Stop the watch before c is closed or returned to
// the pool.
func Conn(c *sql.Conn, fn func()) *Watch {
	var nc net.Conn
	_ = c.Raw(func(dc any) error {
		// A closed connection has no pgx.Conn left (and no socket).
		if pc, ok := dc.(interface{ Conn() *pgx.Conn }); ok && pc.Conn() != nil && pc.Conn().PgConn() != nil {
			nc = pc.Conn().PgConn().Conn()
		}
		return nil
	})
	if nc == nil {
		return nil
	}
	return watchNet(nc, fn)
}

// Stop ends the watch. fn may still be running, or start, if the close was
// seen just before Stop: fn must tolerate a late call. Stop is safe on a
// nil Watch and more than once.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.stop()
}

// Busy tells the watch that its owner runs a statement on the connection
// now: until Idle, answers arriving on the socket do not wake the watcher
// (a FATAL error that cuts the statement off comes back to the statement
// as its error; a close is still seen). Each answer woke it before, for a
// peek at the data: a goroutine switch and two system calls per
// statement. Safe on a nil or stopped Watch.
func (w *Watch) Busy() {
	if w != nil {
		w.busy()
	}
}

// Idle ends a Busy: data arriving now is looked at again. Data that came
// in between and is still unread is looked at at once.
func (w *Watch) Idle() {
	if w != nil {
		w.idle()
	}
}

// fatal reports whether b, the head of the data the server sent, is a
// PostgreSQL ErrorResponse of severity FATAL or PANIC: the message that
// ends a session. An answer to a statement ends in ReadyForQuery, so once
// it is read nothing else is waiting; a FATAL error at the head of what is
// waiting is the server ending the session.
func fatal(b []byte) bool {
	if len(b) < 5 || b[0] != 'E' {
		return false
	}
	n := int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4])
	if n < 4 {
		return false
	}
	// V is the severity never translated (PostgreSQL 9.6 on); S may be
	// in the server's language, and is read only when V is absent.
	sev, ok := "", false
	b = b[5:min(len(b), 1+n)]
	for len(b) > 0 && b[0] != 0 {
		field := b[0]
		end := bytes.IndexByte(b[1:], 0)
		if end < 0 {
			break // cut off by the peek
		}
		v := string(b[1 : 1+end])
		switch {
		case field == 'V':
			return v == "FATAL" || v == "PANIC"
		case field == 'S' && !ok:
			sev, ok = v, true
		}
		b = b[2+end:]
	}
	return sev == "FATAL" || sev == "PANIC"
}
