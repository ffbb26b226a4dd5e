package main

import (
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
)

// sqllock_dialect and sqllock_single_writer choose the MySQL path and
// declare one Galera writer; neither reaches the driver, which would send
// it to the server as a system variable. mysql8 is the old name of the
// MySQL path's value, kept as an alias.
func TestDSNMySQLPathParams(t *testing.T) {
	for _, raw := range []string{
		"mysql://root@127.0.0.1:3306/db?sqllock_dialect=mysql&sqllock_single_writer=1&timeout=5s",
		"root@tcp(127.0.0.1:3306)/db?sqllock_dialect=mysql&sqllock_single_writer=1&timeout=5s",
		"mysql://root@127.0.0.1:3306/db?sqllock_dialect=mysql8&sqllock_single_writer=1&timeout=5s",
		"root@tcp(127.0.0.1:3306)/db?sqllock_dialect=MySQL8&sqllock_single_writer=1&timeout=5s",
	} {
		tg, err := parseDSN(raw)
		if err != nil {
			t.Fatalf("parseDSN(%q): %v", raw, err)
		}
		if tg.dialect != sqllock.MySQL || !tg.pinned || !tg.singleWriter || strings.Contains(tg.dsn, "sqllock_") || !strings.Contains(tg.dsn, "timeout=5s") {
			t.Errorf("parseDSN(%q) = dialect %v, pinned %v, single writer %v, driver DSN %q", raw, tg.dialect, tg.pinned, tg.singleWriter, tg.dsn)
		}
	}
	tg, err := parseDSN("mysql://root@127.0.0.1:3306/db")
	if err != nil || tg.dialect != sqllock.MariaDB || tg.pinned || tg.singleWriter {
		t.Errorf("a plain DSN = %+v, %v; want MariaDB, not pinned: the server chooses later", tg, err)
	}
	tg, err = parseDSN("mysql://root@127.0.0.1:3306/db?sqllock_dialect=mariadb")
	if err != nil || tg.dialect != sqllock.MariaDB || !tg.pinned {
		t.Errorf("sqllock_dialect=mariadb = %+v, %v; want MariaDB, pinned", tg, err)
	}
	for _, raw := range []string{"mysql://root@h:3306/db?sqllock_dialect=oracle", "mysql://root@h:3306/db?sqllock_single_writer=yes"} {
		if _, err := parseDSN(raw); err == nil || !strings.Contains(err.Error(), "sqllock_") {
			t.Errorf("parseDSN(%q) = %v; want an error naming the parameter", raw, err)
		}
	}
}
