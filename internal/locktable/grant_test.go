package locktable

import (
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestGrantPayload: a grant's call, as PostgreSQL writes it ("g" and the
// JSON of the token, the entry as a sqllock_waiter, and the key), reads
// back to the entry the waiter expects, the token and the key, whatever
// characters owner, host and key hold; payloads that are not grants are
// refused.
func TestGrantPayload(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	for _, c := range []struct{ owner, host, key string }{
		{"0123456789abcdef0123456789abcdef", "web-1/4242", "orders:42"},
		{"ümlaut-owner", "hôte/7", "clé/ü"},
		{`o"\,(`, "", `g0000"}`},
		{strings.Repeat("é", 64), strings.Repeat("h", 255), "k"},
	} {
		e, ok := newEntry("00000000deadbeef", c.owner, c.host, 1500*time.Millisecond+300*time.Nanosecond)
		if !ok {
			t.Fatalf("newEntry(%q, %q) refused", c.owner, c.host)
		}
		var payload string
		err := db.QueryRow(`SELECT 'g' || json_build_object('token', $1::bigint,
			'entry', ROW($2::text, $3::bigint, $4::varchar, $5::varchar)::sqllock_waiter, 'key', $6::varchar)::text`,
			int64(1)<<50+1234, e.Caller, micros(e.Window), e.Owner, e.Host, c.key).Scan(&payload)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := parseGrant(payload)
		if !ok {
			t.Fatalf("parseGrant(%q) refused", payload)
		}
		if n.key != c.key || n.owner != c.owner || n.entry != e || n.token != int64(1)<<50+1234 || n.callee != e.Caller || !n.grant || n.ttl != 1500*time.Millisecond {
			t.Errorf("parseGrant(%q) = %+v; want key %q, the entry %+v, token 2^50+1234", payload, n, c.key, e)
		}
	}
	if _, ok := newEntry("00000000deadbeef", "o", "h", 0); ok {
		t.Error("an entry whose grant holds the key for no time was made")
	}
	for _, p := range []string{"", "g", "00000000deadbeefkey", "g{}", `g{"token":0,"entry":{"caller":"00000000deadbeef","claim_us":1},"key":"k"}`,
		`g{"token":5,"entry":{"caller":"00000000deadbeef","claim_us":0},"key":"k"}`, `g{"token":5,"entry":{"caller":"x","claim_us":1},"key":"k"}`} {
		if n, ok := parseGrant(p); ok {
			t.Errorf("parseGrant(%q) = %+v; want it refused", p, n)
		}
	}
}
