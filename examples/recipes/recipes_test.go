package recipes_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

// bind writes a query's ? placeholders as $1, $2, ... on PostgreSQL, as
// sqlx's Rebind does: the recipes run on every dialect.
func bind(d sqllock.Dialect, query string) string {
	if d != sqllock.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// exec runs setup statements, failing the test on an error.
func exec(t testing.TB, db *testdb.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
