package advisory_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// The MySQL path's names, computed outside Go (Python's hashlib). MySQL 8
// folds GET_LOCK names to lower case: a key with anything but lower-case
// ASCII, digits and "_-.:/" is hashed, so "Job" and "job" never meet.
var goldenCommon = []struct{ ns, key, name string }{
	{"sqllock", "a", "sqllock:a"},
	{"sqllock", "jobs/nightly", "sqllock:jobs/nightly"},
	{"", "jobs/nightly", "jobs/nightly"},
	{"sqllock", "job", "sqllock:job"},
	{"sqllock", "Job", "sqllock:job~05bdb7bb5f7402c3334e9b3de43bdde2"},
	{"sqllock", "JOB", "sqllock:job~244f4a499cab6ded8cf35e5000f18212"},
	{"app", "Jobs/Nightly", "app:jobs/nightly~fcf2122cd7150556f1751863ac3be11f"},
	{"sqllock", "clé-ü", "sqllock:cl__-__~bf4b00648b909cd5bdfe537c8873044a"},
	{"sqllock", "a b~c", "sqllock:a_b_c~7f4dc55b0d4ad7f390bef9e778e9aa0b"},
	{"sqllock", strings.Repeat("x", 255), "sqllock:xxxxxxxxxxxxxxxxxxxxxxx~0eca9bc52d4e41a92c0b91f1b1430b41"},
}

func TestGoldenCommonNames(t *testing.T) {
	// The MariaDB path's names keep case: on MySQL 8 these two would be
	// one lock.
	if !strings.EqualFold(advisory.LegacyMariaDBName("sqllock", "Job"), advisory.LegacyMariaDBName("sqllock", "job")) {
		t.Error("LegacyMariaDBName no longer keeps case; update this test and the doc")
	}
	for _, g := range goldenCommon {
		if got := advisory.MySQLName(g.ns, g.key); got != g.name {
			t.Errorf("MySQLName(%q, %.20q) = %q, want %q", g.ns, g.key, got, g.name)
		}
	}
}

// Two names that MySQL 8 would fold to one never come from two keys.
func FuzzCommonNamesCaseSafe(f *testing.F) {
	for _, g := range goldenCommon {
		f.Add(g.ns, g.key, strings.ToUpper(g.key))
	}
	f.Fuzz(func(t *testing.T, ns, a, b string) {
		if a == b || sqllock.ValidateKey(a) != nil || sqllock.ValidateKey(b) != nil ||
			!utf8.ValidString(ns) || len(ns) > advisory.MaxNamespaceLen || strings.ContainsAny(ns, ":\x00") {
			t.Skip()
		}
		na, nb := advisory.MySQLName(ns, a), advisory.MySQLName(ns, b)
		for _, n := range []string{na, nb} {
			if len(n) > advisory.MaxMySQLNameLen || !utf8.ValidString(n) {
				t.Fatalf("name %q: %d bytes or not UTF-8", n, len(n))
			}
		}
		if strings.EqualFold(na, nb) {
			t.Fatalf("keys %q and %q map to %q and %q, one lock on MySQL 8", a, b, na, nb)
		}
	})
}

// On the MySQL path, keys that differ only in case are two locks, each
// held under its own name (IS_USED_LOCK), and one session can hold both.
func TestCommonKeysDifferingInCase(t *testing.T) {
	db := testdb.Open(t, sqllock.MySQL)
	ctx := context.Background()
	l, err := advisory.New(db.DB, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lower := "case-" + strings.ToLower(locktest.Key(t))
	upper := strings.ToUpper(lower)
	other, err := advisory.New(db.DB, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a, err := l.TryAcquire(ctx, lower)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := other.TryAcquire(ctx, upper)
	if err != nil {
		t.Fatalf("TryAcquire(%q) while %q is held elsewhere: %v", upper, lower, err)
	}
	defer b.Release(ctx)
	for _, k := range []string{lower, upper} {
		var id *int64
		name := advisory.MySQLName(advisory.DefaultNamespace, k)
		if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil || id == nil {
			t.Errorf("IS_USED_LOCK(%q) for key %q = %v, %v; want its session", name, k, id, err)
		}
	}
}
