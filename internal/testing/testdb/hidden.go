package testdb

import (
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock"
)

// HiddenPgx is a database/sql driver that serves PostgreSQL through pgx
// behind a driver.Conn of its own, as another PostgreSQL driver would: the
// library cannot reach the pgx connection under it (to LISTEN, or to run
// a statement on it directly).
const HiddenPgx = "sqllock-test-hidden-pgx"

type hidePgx struct{ driver.Driver }

type hiddenConn struct{ driver.Conn }

func (d hidePgx) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return hiddenConn{c}, nil
}

func init() { sql.Register(HiddenPgx, hidePgx{stdlib.GetDefaultDriver()}) }

// OpenHidden opens the PostgreSQL test database through HiddenPgx, closed
// when the test ends (after the cleanups registered later).
func OpenHidden(t testing.TB) *DB {
	t.Helper()
	shared := Open(t, sqllock.Postgres)
	db, err := sql.Open(HiddenPgx, shared.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &DB{DB: db, Dialect: sqllock.Postgres, Driver: HiddenPgx, DSN: shared.DSN}
}
