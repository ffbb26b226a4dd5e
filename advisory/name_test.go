package advisory_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
)

// The golden values were computed outside Go (Python's hashlib). A change
// here moves every lock of every deployed user to a new id: two versions of
// an application would then stop excluding each other.
var golden = []struct {
	ns, key string
	pg      int64
	mysql   string
}{
	{"sqllock", "a", 178842446026355155, "sqllock:a"},
	{"sqllock", "jobs/nightly", 3019283710020832378, "sqllock:jobs/nightly"},
	{"", "jobs/nightly", -7836533424575595787, "jobs/nightly"},
	{"app", "Jobs/Nightly", -220093447991392938, "app:Jobs/Nightly"},
	{"sqllock", "clé-ü", -4662632557373776683, "sqllock:clé-ü"},
	{"sqllock", strings.Repeat("x", 255), 1065835532997509545, "sqllock:xxxxxxxxxxxxxxxxxxxxxxx~0eca9bc52d4e41a92c0b91f1b1430b41"},
	// The cut before the hash falls on a character boundary (30 bytes, not 31).
	{"sqllock", strings.Repeat("é", 40), 1734421996867873944, "sqllock:ééééééééééé~1811e79de5eeec98abe034c9da99f250"},
}

func TestGoldenNames(t *testing.T) {
	for _, g := range golden {
		if got := advisory.PostgresKey(g.ns, g.key); got != g.pg {
			t.Errorf("PostgresKey(%q, %.20q) = %d, want %d", g.ns, g.key, got, g.pg)
		}
		if got := advisory.LegacyMariaDBName(g.ns, g.key); got != g.mysql {
			t.Errorf("LegacyMariaDBName(%q, %.20q) = %q, want %q", g.ns, g.key, got, g.mysql)
		}
	}
}

func FuzzNames(f *testing.F) {
	for _, g := range golden {
		f.Add(g.ns, g.key)
	}
	f.Add("ns", "k:with:colons")
	f.Fuzz(func(t *testing.T, ns, key string) {
		if sqllock.ValidateKey(key) != nil || !utf8.ValidString(ns) || len(ns) > advisory.MaxNamespaceLen || strings.ContainsAny(ns, ":\x00") {
			t.Skip()
		}
		name := advisory.LegacyMariaDBName(ns, key)
		if len(name) > advisory.MaxMySQLNameLen {
			t.Fatalf("LegacyMariaDBName(%q, %q) = %d bytes", ns, key, len(name))
		}
		if !utf8.ValidString(name) {
			t.Fatalf("LegacyMariaDBName(%q, %q) = %q, not UTF-8", ns, key, name)
		}
		full := advisory.LockName(ns, key)
		if len(full) <= advisory.MaxMySQLNameLen && name != full {
			t.Fatalf("short name %q changed to %q", full, name)
		}
		if len(full) > advisory.MaxMySQLNameLen && !strings.HasPrefix(full, name[:strings.LastIndexByte(name, '~')]) {
			t.Fatalf("hashed name %q does not keep a prefix of %q", name, full)
		}
		// Sensitive to the namespace.
		if ns != "" && advisory.PostgresKey(ns, key) == advisory.PostgresKey("", key) {
			t.Fatalf("namespace %q ignored for %q", ns, key)
		}
	})
}
