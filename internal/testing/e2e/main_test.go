package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newTableLocker(t testing.TB, db *testdb.DB, opts ...tablelock.Option) *tablelock.Locker {
	t.Helper()
	l, err := tablelock.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
