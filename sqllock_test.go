package sqllock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
)

func TestValidateKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"":                                false,
		"a":                               true,
		"jobs/nightly-report":             true,
		"ключ":                            true,
		strings.Repeat("k", 255):          true,
		strings.Repeat("k", 256):          false,
		strings.Repeat("é", 128):          false, // 256 bytes
		"bad\x00key":                      false,
		string([]byte{0xff, 0xfe, 'a'}):   false,
		"spaces and 'quotes'; DROP TABLE": true, // keys are bound, never pasted
	} {
		err := sqllock.ValidateKey(key)
		if ok && err != nil {
			t.Errorf("ValidateKey(%.20q) = %v, want nil", key, err)
		}
		if !ok && !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("ValidateKey(%.20q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

// TestParseDialect: every name ParseDialect documents maps to its dialect,
// in any case; "mysql" is the MySQL path (the old "mysql8" and
// "mysql-common" stay as aliases) and "mariadb" MariaDB's own; String
// gives the canonical name back, which ParseDialect takes again. The
// numbers stay 1 to 4, so Valid is a range check.
func TestParseDialect(t *testing.T) {
	for in, want := range map[string]sqllock.Dialect{
		"postgres": sqllock.Postgres, "PostgreSQL": sqllock.Postgres, "pgx": sqllock.Postgres,
		"mariadb": sqllock.MariaDB, "MariaDB": sqllock.MariaDB,
		"sqlite": sqllock.SQLite, "sqlite3": sqllock.SQLite,
		"mysql": sqllock.MySQL, "MySQL": sqllock.MySQL, "mysql8": sqllock.MySQL, "MySQL-Common": sqllock.MySQL,
	} {
		got, err := sqllock.ParseDialect(in)
		if err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for d, name := range map[sqllock.Dialect]string{
		1: "postgres", 2: "mariadb", 3: "sqlite", 4: "mysql",
	} {
		if d.String() != name || !d.Valid() {
			t.Errorf("Dialect(%d) = %q (valid %v); want %q", int(d), d.String(), d.Valid(), name)
		}
		if back, err := sqllock.ParseDialect(d.String()); err != nil || back != d {
			t.Errorf("%v does not round-trip through String: %v, %v", d, back, err)
		}
	}
	if sqllock.Postgres != 1 || sqllock.MariaDB != 2 || sqllock.SQLite != 3 || sqllock.MySQL != 4 {
		t.Error("the dialects' numbers moved")
	}
	if !sqllock.MariaDB.IsMySQL() || !sqllock.MySQL.IsMySQL() || sqllock.Postgres.IsMySQL() || sqllock.SQLite.IsMySQL() {
		t.Error("IsMySQL does not name exactly the two MySQL-family dialects")
	}
	for _, in := range []string{"", "oracle", "postgres ", "mysql 8"} {
		if _, err := sqllock.ParseDialect(in); err == nil || !strings.Contains(err.Error(), "postgres, mariadb, mysql or sqlite") {
			t.Errorf("ParseDialect(%q) = %v, want an error listing the choices", in, err)
		}
	}
	if sqllock.Dialect(0).Valid() || sqllock.Dialect(5).Valid() {
		t.Error("out-of-range dialects reported valid")
	}
}

func TestValidateOwner(t *testing.T) {
	if err := sqllock.ValidateOwner("worker-7"); err != nil {
		t.Fatalf("ValidateOwner(worker-7) = %v", err)
	}
	// Owners are refused as keys are: a database would reject or mangle
	// the bytes, and an operator could not read them back.
	for _, bad := range []string{"", strings.Repeat("o", sqllock.MaxOwnerLen+1), "worker-\xff", "worker\x00-7"} {
		if err := sqllock.ValidateOwner(bad); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("owner %q: %v, want ErrInvalidOption", bad, err)
		}
	}
}
