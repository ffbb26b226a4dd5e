package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		in      string
		dialect sqllock.Dialect
		dsn     string // driver DSN; "" skips the check
	}{
		{"postgres://u:p@db:5432/app?sslmode=disable", sqllock.Postgres, "postgres://u:p@db:5432/app?sslmode=disable"},
		{"postgresql://u@db/app", sqllock.Postgres, ""},
		{"host=db user=u dbname=app", sqllock.Postgres, "host=db user=u dbname=app"},
		{"mysql://root@127.0.0.1:3306/test", sqllock.MySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"mysql://root@db/test", sqllock.MySQL, "root@tcp(db:3306)/test?parseTime=true"},
		{"mysql://u:p%40ss@db:3307/app?timeout=5s", sqllock.MySQL, "u:p@ss@tcp(db:3307)/app?parseTime=true&timeout=5s"},
		{"mariadb://u@[::1]:3306/app", sqllock.MySQL, "u@tcp([::1]:3306)/app?parseTime=true"},
		{"root@tcp(127.0.0.1:3306)/test", sqllock.MySQL, "root@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"sqlite://locks.db", sqllock.SQLite, sqliteDSN("locks.db")},
		{"sqlite:///var/lib/app/locks.db", sqllock.SQLite, sqliteDSN("/var/lib/app/locks.db")},
	} {
		got, err := parseDSN(tc.in)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.in, err)
			continue
		}
		if got.dialect != tc.dialect || (tc.dsn != "" && got.dsn != tc.dsn) {
			t.Errorf("parseDSN(%q) = %v %q, want %v %q", tc.in, got.dialect, got.dsn, tc.dialect, tc.dsn)
		}
		if strings.Contains(got.display, "p@ss") || strings.Contains(got.display, ":p@") {
			t.Errorf("parseDSN(%q).display = %q shows the password", tc.in, got.display)
		}
	}
	for _, in := range []string{
		"", "redis://localhost", "just-a-word", "mysql://db:3306", "mysql:///app", "sqlite://",
		"postgres://u@db:notaport/app", "root@tcp(127.0.0.1:3306)/test?unknownparam=%zz",
	} {
		_, err := parseDSN(in)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitBadDSN {
			t.Errorf("parseDSN(%q) = %v, want a bad-DSN error (exit %d)", in, err, exitBadDSN)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	f.Add("mysql://u:p@h:1/d?x=y")
	f.Add("postgres://u@h/d")
	f.Add("sqlite://a.db")
	f.Fuzz(func(t *testing.T, in string) {
		tg, err := parseDSN(in)
		if err == nil && !tg.dialect.Valid() {
			t.Fatalf("parseDSN(%q) accepted with no dialect", in)
		}
	})
}
