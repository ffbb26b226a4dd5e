package election_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

const (
	envRole    = "SQLLOCK_ELECT_ROLE"
	envDialect = "SQLLOCK_ELECT_DIALECT"
	envName    = "SQLLOCK_ELECT_NAME"
	envProbe   = "SQLLOCK_ELECT_PROBE"
	envTTL     = "SQLLOCK_ELECT_TTL"
	rounds     = 4 // leaderships per campaigner process
)

func newElection(t testing.TB, db *testdb.DB, opts ...tablelock.Option) *election.Election {
	t.Helper()
	e, err := election.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestChild is the body of the child processes; it does nothing in a
// normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("only runs as a child process of the election tests")
	}
	d, err := sqllock.ParseDialect(os.Getenv(envDialect))
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	db := testdb.Open(t, d)
	e := newElection(t, db, tablelock.WithTTL(ttl))
	ctx := context.Background()
	name := os.Getenv(envName)
	value := strconv.Itoa(os.Getpid())
	switch role {
	case "campaigner":
		c, err := net.Dial("unix", os.Getenv(envProbe))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		say := func(msg string) {
			if _, err := fmt.Fprintln(c, msg); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		for range rounds {
			lead, err := e.Campaign(ctx, name, value)
			if err != nil {
				t.Fatal(err)
			}
			say("+" + strconv.FormatInt(lead.Term(), 10))
			time.Sleep(20 * time.Millisecond)
			say("-")
			if err := lead.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
	case "leader":
		// Lead, then write to the fenced resource every 20ms with the
		// term, without looking at Err: the fence alone must stop it.
		lead, err := e.Campaign(ctx, name, value)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("LEADER %d\n", lead.Term())
		locktest.FencedWrites(t, db, name, lead.Term())
	}
}

// probe counts the leaders that say so, across processes, and the terms
// in the order they began.
type probe struct {
	path  string
	wg    sync.WaitGroup
	mu    sync.Mutex
	cur   int
	max   int
	terms []int64
}

func newProbe(t *testing.T) *probe {
	p := &probe{path: filepath.Join(t.TempDir(), "probe.sock")}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *probe) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		p.mu.Lock()
		if term, ok := strings.CutPrefix(sc.Text(), "+"); ok {
			n, _ := strconv.ParseInt(term, 10, 64)
			p.cur++
			p.max = max(p.max, p.cur)
			p.terms = append(p.terms, n)
		} else {
			p.cur--
		}
		p.mu.Unlock()
		if _, err := fmt.Fprintln(c, "ok"); err != nil {
			return
		}
	}
}

// TestCampaignProcesses: 3 processes campaign in turns; a probe outside
// them sees one leader at a time with strictly increasing terms, and
// Observe delivers every leadership, in order.
func TestCampaignProcesses(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		name := locktest.Key(t)
		e := newElection(t, db)
		if db.Dialect == sqllock.Postgres {
			// Announcements alone must deliver every term, in order.
			election.SetSafetyPoll(e, time.Hour)
		}
		seen, err := e.Observe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		pr := newProbe(t)
		var children []*exec.Cmd
		var outs []*strings.Builder
		for range 3 {
			cmd := testdb.Child(t, "TestChild", envRole+"=campaigner", envDialect+"="+db.Dialect.String(), envName+"="+name, envProbe+"="+pr.path)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			children, outs = append(children, cmd), append(outs, &out)
		}
		for i, c := range children {
			if err := c.Wait(); err != nil {
				t.Fatalf("child %d: %v\n%s", i, err, outs[i])
			}
		}
		pr.mu.Lock()
		terms := append([]int64(nil), pr.terms...)
		most := pr.max
		pr.mu.Unlock()
		if most != 1 {
			t.Fatalf("%d leaders at once, want 1", most)
		}
		if len(terms) != 3*rounds {
			t.Fatalf("%d leaderships, want %d", len(terms), 3*rounds)
		}
		for i := 1; i < len(terms); i++ {
			if terms[i] <= terms[i-1] {
				t.Fatalf("terms not increasing: %v", terms)
			}
		}
		var observed []int64
		timeout := time.After(20 * time.Second)
		for len(observed) < len(terms) {
			select {
			case ld := <-seen:
				observed = append(observed, ld.Term)
			case <-timeout:
				t.Fatalf("Observe delivered %v, want %v", observed, terms)
			}
		}
		if fmt.Sprint(observed) != fmt.Sprint(terms) {
			t.Fatalf("Observe delivered %v, want every leadership in order %v", observed, terms)
		}
		if _, err := e.Leader(ctx, name); !errors.Is(err, election.ErrNoLeader) {
			t.Fatalf("Leader after every leader resigned: %v, want ErrNoLeader", err)
		}
	})
}

// startLeader runs a child that leads name and writes fenced; it returns
// the child, its term and the lines it prints after.
func startLeader(t *testing.T, db *testdb.DB, name string, ttl time.Duration) (*exec.Cmd, int64, <-chan string) {
	cmd := testdb.Child(t, "TestChild", envRole+"=leader", envDialect+"="+db.Dialect.String(), envName+"="+name, envTTL+"="+ttl.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	first := make(chan int64, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "LEADER "); ok {
				n, _ := strconv.ParseInt(s, 10, 64)
				first <- n
				continue
			}
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case term := <-first:
		return cmd, term, lines
	case <-time.After(30 * time.Second):
		t.Fatal("the child never led")
	}
	return nil, 0, nil
}

// TestLeaderKilled: when the leader is killed with SIGKILL, a campaigner
// leads within TTL + one renewal interval, with a larger term, and Leader
// shows it.
func TestLeaderKilled(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = 2 * time.Second
		name := locktest.Key(t)
		e := newElection(t, db, tablelock.WithTTL(ttl))
		child, old, _ := startLeader(t, db, name, ttl)
		if ld, err := e.Leader(ctx, name); err != nil || ld.Term != old || ld.Value != strconv.Itoa(child.Process.Pid) {
			t.Fatalf("Leader = %+v, %v; want term %d, the child's pid", ld, err, old)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		lead, err := e.Campaign(ctx, name, "parent")
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Resign(ctx)
		took := time.Since(killed)
		t.Logf("new leader %v after the kill (TTL %v, renewal every %v)", took, ttl, ttl/3)
		if lead.Term() <= old {
			t.Fatalf("new term %d not above the killed leader's %d", lead.Term(), old)
		}
		if took > ttl+ttl/3+2*time.Second {
			t.Fatalf("new leader after %v, want within TTL+renewal %v", took, ttl+ttl/3)
		}
		if ld, err := e.Leader(ctx, name); err != nil || ld.Term != lead.Term() || ld.Value != "parent" {
			t.Fatalf("Leader = %+v, %v; want the new leader", ld, err)
		}
	})
}

// TestPausedLeaderFenced: a leader paused (SIGSTOP) past its TTL is
// replaced; when it resumes, its next fenced write is refused.
func TestPausedLeaderFenced(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = 1500 * time.Millisecond
		name := locktest.Key(t)
		e := newElection(t, db, tablelock.WithTTL(ttl))
		child, old, lines := startLeader(t, db, name, ttl)
		testdb.Pause(t, db, child)
		lead, err := e.Campaign(ctx, name, "parent")
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Resign(ctx)
		if lead.Term() <= old {
			t.Fatalf("new term %d not above the paused leader's %d", lead.Term(), old)
		}
		f, err := fence.New(db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, db.DB, name, lead.Term()); err != nil {
			t.Fatalf("the new leader's fenced write: %v", err)
		}
		if err := child.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
		for refused := false; !refused; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("the resumed leader ended without a refused write")
				}
				refused = l == "REFUSED"
			case <-timeout:
				t.Fatal("the resumed leader's write was not refused")
			}
		}
	})
}

// TestInput: bad names and values are refused, naming the election.
func TestInput(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	e := newElection(t, db)
	ctx := context.Background()
	long := strings.Repeat("n", sqllock.MaxKeyLen)
	if _, err := e.Campaign(ctx, long, "v"); !errors.Is(err, sqllock.ErrInvalidKey) {
		t.Errorf("a name too long: %v", err)
	}
	if _, err := e.Campaign(ctx, "a", strings.Repeat("v", 1<<17)); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("a value too long: %v", err)
	}
	if _, err := e.Leader(ctx, locktest.Key(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader of an election never held: %v", err)
	}
}

// TestObserveAnnounced: on PostgreSQL, Observe hears each new term — a
// campaign, one after a resign, a campaigner's takeover from a leader that
// went away — with its safety poll an hour long, so only the announcement
// can deliver it; and when its context ends it leaves no goroutine and no
// connection behind.
func TestObserveAnnounced(t *testing.T) {
	db := testdb.Fresh(t, sqllock.Postgres, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := locktest.Key(t)
	obs := newElection(t, db)
	election.SetSafetyPoll(obs, time.Hour)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen, err := obs.Observe(octx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The campaigners are other Elections: other Lockers, other sessions,
	// as in other processes.
	a, b, c := newElection(t, db), newElection(t, db), newElection(t, db)
	expect := func(lead *election.Leadership) {
		t.Helper()
		select {
		case ld := <-seen:
			if ld.Term != lead.Term() || ld.Value != lead.Value() {
				t.Fatalf("Observe delivered term %d %q, want term %d %q", ld.Term, ld.Value, lead.Term(), lead.Value())
			}
		case <-ctx.Done():
			t.Fatalf("Observe never delivered term %d: announcement not heard", lead.Term())
		}
	}
	la, err := a.Campaign(ctx, name, "a")
	if err != nil {
		t.Fatal(err)
	}
	expect(la)
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Campaign(ctx, name, "b")
	if err != nil {
		t.Fatal(err)
	}
	expect(lb)
	// c waits; b's Election goes away and c takes over.
	won := make(chan *election.Leadership, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := c.Campaign(ctx, name, "c")
		if err != nil {
			errs <- err
			return
		}
		won <- l
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var lc *election.Leadership
	select {
	case lc = <-won:
	case err := <-errs:
		t.Fatal(err)
	}
	expect(lc)
	if !(la.Term() < lb.Term() && lb.Term() < lc.Term()) {
		t.Fatalf("terms %d, %d, %d not increasing", la.Term(), lb.Term(), lc.Term())
	}
	ocancel()
	for range seen { // closed once the context ends
	}
	for _, e := range []*election.Election{obs, a, b, c} {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections still in use after Observe ended and its Election closed", n)
	}
}

// TestObserveClosed: closing the Election ends its Observes, and a later
// Observe is refused.
func TestObserveClosed(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		e, err := election.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		seen, err := e.Observe(context.Background(), locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		for range seen { // closed by Close, with no context to end it
		}
		if _, err := e.Observe(context.Background(), locktest.Key(t)); !errors.Is(err, sqllock.ErrClosed) {
			t.Fatalf("Observe after Close: %v, want ErrClosed", err)
		}
	})
}
