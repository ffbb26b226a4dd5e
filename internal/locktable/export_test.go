package locktable

import (
	"context"
	"time"

	"github.com/sqllock/sqllock/internal/server"
)

// Prepared is how many statements t has prepared through database/sql.
func (t *Table) Prepared() int { return t.h.stmts.Len() }

// Quiet reports whether t's PostgreSQL store takes key for quiet: its
// release then tries the statement that assumes nobody waits first.
func (t *Table) Quiet(key string) bool {
	ps, ok := t.st.(*postgresStore)
	return ok && ps.rows.quiet(key)
}

// Kept reports whether g, a file gate, keeps key's pipe open.
func (g *Gate) Kept(key string) bool {
	g.file.mu.Lock()
	defer g.file.mu.Unlock()
	return g.file.kept[key] != nil
}

// ServerCheck is t's Check of its server: nil where the dialect probes
// none.
func (t *Table) ServerCheck() *server.Check { return t.srv }

// ReleaseContext is the context t's release statement runs under, given
// ctx: on SQLite, without ctx's cancellation where it cannot outlast ctx.
func (t *Table) ReleaseContext(ctx context.Context) context.Context {
	if s, ok := t.st.(*sqliteStore); ok {
		return s.uncancelled(ctx, t.h)
	}
	return ctx
}

// Lane reports whether t's SQLite store runs its statements on a
// connection of its own now.
func (t *Table) Lane() bool {
	s, ok := t.st.(*sqliteStore)
	if !ok {
		return false
	}
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	return s.lane.conn != nil
}

// SetLaneRetry sets how long a failed SQLite lane stays closed, until the
// test ends.
func SetLaneRetry(t interface{ Cleanup(func()) }, d time.Duration) {
	old := laneRetry
	laneRetry = d
	t.Cleanup(func() { laneRetry = old })
}

// FairCalls is t's fair release statement, the statement that sends the
// calls of a grant it made, and the table's and call channels' names
// (the release's last two parameters); empty where t does not release in
// fair order.
func (t *Table) FairCalls() (release, calls, channel, call string) {
	ps, ok := t.st.(*postgresStore)
	if !ok || ps.q.notifyGrant == "" {
		return "", "", "", ""
	}
	return ps.q.release, ps.q.notifyGrant, ps.channel, ps.call
}
