package testdb

import (
	"io"
	"log"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock"
)

// Proxy is a TCP relay between the tests and a database server, for
// network faults: Cut drops every connection and refuses new ones (a
// partition, or a server restart as the client sees it); Restore lets
// connections through again; Delay holds back what the server sends.
type Proxy struct {
	*DB // a handle whose connections go through the proxy

	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	delay time.Duration // held back, each chunk the server sends
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

var hostPort = regexp.MustCompile(`(@tcp\(|@)(127\.0\.0\.1|localhost|\[::1\]|[A-Za-z0-9.-]+):(\d+)`)

// NewProxy opens a handle on d's database whose connections pass through a
// proxy, closed when the test ends. SQLite has no network: the test is
// skipped for it.
func NewProxy(t testing.TB, d sqllock.Dialect) *Proxy {
	t.Helper()
	shared := Open(t, d)
	// The faults are deliberate: keep the MySQL driver's log of every
	// broken connection out of the test output.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	m := hostPort.FindStringSubmatchIndex(shared.DSN)
	if m == nil {
		t.Skipf("no host:port in the %v DSN to proxy", d)
	}
	target := shared.DSN[m[4]:m[5]] + ":" + shared.DSN[m[6]:m[7]]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	dsn := shared.DSN[:m[4]] + strings.Replace(shared.DSN[m[4]:], target, ln.Addr().String(), 1)
	p.wg.Add(1)
	go p.accept()
	fresh := openWith(t, shared, dsn)
	p.DB = fresh
	t.Cleanup(func() {
		fresh.Close()
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies src to dst until either ends. fromServer: src is the server,
// whose bytes Delay holds back.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromServer {
				p.mu.Lock()
				d := p.delay
				p.mu.Unlock()
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut drops every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Drop closes the proxied connections once but lets new ones through: a
// reset connection, as after a failover or an idle timeout.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Delay holds back every chunk the server sends for d before passing it on
// (0: none): an answer that the server has committed to but the client
// reads late, as over a slow or congested network.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
