package advisory

import (
	"context"
	"errors"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// recorder is a handle that keeps the statement it is given and runs
// nothing; hi is what its session knows of its tokens (nil: no session).
type recorder struct {
	query string
	hi    *tokenHigh
}

func (r *recorder) high() *tokenHigh { return r.hi }

var errRecorded = errors.New("recorded, not run")

func (r *recorder) queryRow(_ context.Context, query string, _ []any, _ any) error {
	r.query = query
	return errRecorded
}

// TestGoldenStatements: every statement of the advisory store, per dialect
// and mode, as testdata/ holds it; go test -update rewrites the files. The
// statements are read from the store's methods as they run them.
func TestGoldenStatements(t *testing.T) {
	for _, c := range []struct {
		file string
		d    sqllock.Dialect
	}{
		{"postgres.sql", sqllock.Postgres},
		{"mariadb.sql", sqllock.MariaDB},
		{"mysql.sql", sqllock.MySQL},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			st := stores[c.d]
			id := st.lockID(DefaultNamespace, "example")
			ctx := context.Background()
			var stmts []golden.Statement
			run := func(name string, f func(h handle)) {
				r := &recorder{}
				f(r)
				if r.query != "" {
					stmts = append(stmts, golden.Statement{Name: name, SQL: r.query})
				}
				// Again on a session that knows its era, and on one that
				// knows its timeline (a schema without the era), where
				// that sends another statement.
				for _, k := range []struct {
					suffix string
					hi     tokenHigh
				}{{"KnownEra", tokenHigh{bits: 1 << 12, by: highEra}}, {"KnownTimeline", tokenHigh{bits: 1, by: highTimeline}}} {
					known := &recorder{hi: &k.hi}
					f(known)
					if known.query != "" && known.query != r.query {
						stmts = append(stmts, golden.Statement{Name: name + k.suffix, SQL: known.query})
					}
				}
			}
			for _, m := range []struct {
				name string
				m    mode
			}{{"", exclusive}, {"Shared", shared}} {
				if m.m == shared && st.supports(featShared) != nil {
					continue
				}
				run("Try"+m.name, func(h handle) { st.try(ctx, h, id, m.m) })
				run("Block"+m.name, func(h handle) { st.block(ctx, h, id, m.m) })
				run("Unlock"+m.name, func(h handle) { st.unlock(ctx, h, id, m.m) })
			}
			run("UnlockAll", func(h handle) { st.unlockAll(ctx, h) })
			run("TxTry", func(h handle) { st.acquireTx(ctx, h, id, false) })
			run("TxLock", func(h handle) { st.acquireTx(ctx, h, id, true) })
			stmts = append(stmts,
				golden.Statement{Name: "BackendID", SQL: st.backendID()},
				golden.Statement{Name: "Interrupt", SQL: st.interrupt(12345)})
			if c.d == sqllock.Postgres {
				stmts = append(stmts, golden.Statement{Name: "TokenEra", SQL: pgEra})
			}
			golden.Check(t, c.file, golden.Render(stmts))
		})
	}
}
