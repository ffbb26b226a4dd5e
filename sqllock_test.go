package sqllock_test

import (
	"context"
	"errors"
	"os"
	"strconv"
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
		if _, err := sqllock.ParseDialect(in); err == nil || !strings.Contains(err.Error(), "postgres, mysql or sqlite") {
			t.Errorf("ParseDialect(%q) = %v, want an error listing the choices", in, err)
		}
	}
	if sqllock.Dialect(0).Valid() || sqllock.Dialect(4).Valid() {
		t.Error("out-of-range dialects reported valid")
	}
}

func TestOwner(t *testing.T) {
	ctx := context.Background()
	a, freshA, err := sqllock.ResolveOwner(ctx)
	b, _, _ := sqllock.ResolveOwner(ctx)
	if err != nil || !freshA || a == b || len(a) != 32 {
		t.Fatalf("no owner in ctx: got %q and %q (fresh %v, %v); want two distinct random ids", a, b, freshA, err)
	}
	got, fresh, err := sqllock.ResolveOwner(sqllock.WithOwner(ctx, "worker-7"))
	if err != nil || fresh || got != "worker-7" {
		t.Fatalf("ResolveOwner(WithOwner) = %q, %v, %v", got, fresh, err)
	}
	// Owners are refused as keys are: a database would reject or mangle
	// the bytes, and an operator could not read them back.
	for _, bad := range []string{"", strings.Repeat("o", sqllock.MaxOwnerLen+1), "worker-\xff", "worker\x00-7"} {
		if _, _, err := sqllock.ResolveOwner(sqllock.WithOwner(ctx, bad)); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("owner %q: %v, want ErrInvalidOption", bad, err)
		}
	}
	// Two processes on one host never share an identity.
	if h := sqllock.Host(); !strings.HasSuffix(h, "/"+strconv.Itoa(os.Getpid())) {
		t.Errorf("Host() = %q, want hostname/pid", h)
	}
}
