package rowlease

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGrantPayload: a grant's call, as the release writes it ("g", the
// token in 20 digits, the entry, the key), reads back to the entry's
// owner, the token and the key, whatever characters owner, host and key
// hold; payloads that are not grants are refused.
func TestGrantPayload(t *testing.T) {
	for _, c := range []struct{ owner, host, key string }{
		{"0123456789abcdef0123456789abcdef", "web-1/4242", "orders:42"},
		{"ümlaut-owner", "hôte/7", "clé/ü"},
		{"o", "", "g0000"},
		{strings.Repeat("é", 64), strings.Repeat("h", 300), "k"},
	} {
		e, ok := entry("00000000deadbeef", c.owner, c.host, 1500*time.Millisecond)
		if !ok {
			t.Fatalf("entry(%q, %q) refused", c.owner, c.host)
		}
		if !strings.HasPrefix(e, "00000000deadbeef000000001500000") {
			t.Errorf("entry %q: want the id, then the lease in 15 digits", e)
		}
		payload := "g" + strings.Repeat("0", 20-len("1234")) + "1234" + e + c.key
		n, ok := parseGrant(payload)
		if !ok {
			t.Fatalf("parseGrant(%q) refused", payload)
		}
		if n.key != c.key || n.owner != c.owner || n.entry != e || n.token != 1234 || n.callee != "00000000deadbeef" || !n.grant {
			t.Errorf("parseGrant(%q) = %+v; want key %q, owner %q, the entry, token 1234", payload, n, c.key, c.owner)
		}
	}
	if _, ok := entry("00000000deadbeef", "o", "h", 1e15*time.Microsecond); ok {
		t.Error("a lease of 16 digits of microseconds fit in an entry")
	}
	for _, p := range []string{"", "g", "00000000deadbeefkey", "g" + strings.Repeat("x", 80), "g" + strconv.Itoa(1) + strings.Repeat("0", 60)} {
		if n, ok := parseGrant(p); ok {
			t.Errorf("parseGrant(%q) = %+v; want it refused", p, n)
		}
	}
}
