package testdb

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sqllock/sqllock"
)

// Toxi is a toxiproxy proxy, run in this process, between the tests and
// d's server: latency, resets, black holes, slow closes and bandwidth
// limits on the live connections (Add), where Proxy only cuts or delays.
type Toxi struct {
	*DB // a handle whose connections go through the proxy
	p   *toxiproxy.Proxy
}

// NewToxi opens a handle on d's database through a new toxiproxy proxy,
// both closed when the test ends. SQLite has no network: skipped.
func NewToxi(t testing.TB, d sqllock.Dialect) *Toxi {
	t.Helper()
	shared := Open(t, d)
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	// Some toxics log through zerolog's global logger, not the server's.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	m := hostPort.FindStringSubmatchIndex(shared.DSN)
	if m == nil {
		t.Skipf("no host:port in the %v DSN to proxy", d)
	}
	target := shared.DSN[m[4]:m[5]] + ":" + shared.DSN[m[6]:m[7]]
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, t.Name(), "127.0.0.1:0", target)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	addr := p.Listen
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.Stop()
		t.Fatalf("toxiproxy listens on %q: %v", addr, err)
	}
	dsn := shared.DSN[:m[4]] + strings.Replace(shared.DSN[m[4]:], target, addr, 1)
	db := openWith(t, shared, dsn)
	t.Cleanup(func() {
		db.Close()
		p.Stop()
	})
	return &Toxi{DB: db, p: p}
}

// Add adds a toxic: typ is toxiproxy's name for it (latency, reset_peer,
// timeout, slow_close, bandwidth), stream "upstream" or "downstream",
// attrs its attributes. It applies to the connections open now and later.
func (x *Toxi) Add(t testing.TB, name, typ, stream string, attrs map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "attributes": attrs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		t.Fatalf("toxic %s: %v", name, err)
	}
}

// Reset removes every toxic.
func (x *Toxi) Reset() { x.p.Toxics.ResetToxics(context.Background()) }
