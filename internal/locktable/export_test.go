package locktable

import "github.com/sqllock/sqllock/internal/server"

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
