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

func TestParseDialect(t *testing.T) {
	for in, want := range map[string]sqllock.Dialect{
		"postgres": sqllock.Postgres, "PostgreSQL": sqllock.Postgres, "pgx": sqllock.Postgres,
		"mysql": sqllock.MySQL, "MariaDB": sqllock.MySQL,
		"sqlite": sqllock.SQLite, "sqlite3": sqllock.SQLite,
		"mysql8": sqllock.MySQLCommon, "MySQL-Common": sqllock.MySQLCommon,
	} {
		got, err := sqllock.ParseDialect(in)
		if err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := sqllock.ParseDialect(got.String()); back != got || !got.Valid() {
			t.Errorf("%v does not round-trip through String", got)
		}
	}
	for _, in := range []string{"", "oracle", "postgres "} {
		if _, err := sqllock.ParseDialect(in); err == nil || !strings.Contains(err.Error(), "postgres, mysql, mysql8 or sqlite") {
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
