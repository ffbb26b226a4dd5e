package rowlease

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/lease"
)

// A gate is a wake-up for waiters in other processes where the dialect has
// no announcements (MariaDB): a server-side named lock per key that the
// holding Locker keeps, on one session of its own, for as long as it holds
// the key's row, and lets go of only after the row's release committed. A
// waiter blocks in the server on the gate and is woken by the server the
// moment the holder lets go, then claims the row as always. The row stays
// the only source of truth: a gate only says "look again", so a holder
// whose gate session died still holds by its row, and a waiter that got a
// gate at once (nobody kept it) finds the key held and polls as before.
//
// Sessions pinned: one per Locker for the gates of every key it holds (one
// session can keep many named locks), taken while it holds something and
// given back to the pool two seconds after its last key; and one per key
// waited for, per Locker, for as long as the head of that key's waiters
// blocks (the others of the same Locker wait for in-process wake-ups), at
// most maxGateWaits at once. A pool capped by SetMaxOpenConns gets gates
// only with room for them beside the Locker's own statements: the gate
// session when the cap is 4 or more, and a wait for every two connections
// above 4. A cancelled wait kills its statement on the server (KILL QUERY
// from another session of the pool) and discards its session, so nothing
// is left waiting on the server.

// maxGateWaits bounds the waits a Gate blocks in the server at once, each
// on a session of its own; further waiters pause and poll as without gates.
const maxGateWaits = 4

// gateLinger keeps the gate session open this long after the last gate is
// let go, so a Locker taking keys in a loop does not reconnect each time.
const gateLinger = 2 * time.Second

// gater is a store whose dialect can gate keys.
type gater interface {
	// gateName is the server-wide name of key's gate in this table.
	gateName(key string) string
	gateStatements() gateSQL
}

// gateSQL are a dialect's gate statements.
type gateSQL struct {
	arm    string // (name) -> 1 kept, 0 kept by another session (a waiter passing through)
	disarm string // (name)
	all    string // lets go of every gate of the session
	wait   string // (name, seconds, name) -> 1 when got (and let go at once), else 0 or NULL
	connID string // -> this session's id, for kill
	kill   string // fmt verb %d: the session id whose statement to interrupt
}

// GateName is the server-wide name of the gate of key in the lock table
// named table (as configured), for operators and tests: a case-safe digest,
// since MariaDB compares lock names without regard to case and caps them
// at 64 characters, and keys compare byte for byte. The prefix keeps gates
// apart from the advisory strategy's names.
func GateName(table, key string) string {
	h := sha256.Sum256([]byte(table + "\x00" + key))
	return "sqllock.gate." + hex.EncodeToString(h[:20])
}

// Gate keeps the gates of the keys a Locker holds, and blocks its waiters
// on the gates of keys held elsewhere. It is safe for concurrent use.
type Gate struct {
	db  *sql.DB
	g   gater
	q   gateSQL
	log *slog.Logger

	waits chan struct{} // a token per wait blocking in the server

	mu      sync.Mutex
	want    map[string]int // gate name -> holds that want it kept
	kick    chan struct{}  // buffered 1: want changed
	running bool
	closed  bool
	stop    context.CancelFunc
	wg      sync.WaitGroup // gate goroutines
}

// Gate returns the Table's Gate, or nil where the dialect has none.
func (t *Table) Gate(log *slog.Logger) *Gate {
	g, ok := t.st.(gater)
	if !ok || g.gateStatements().wait == "" {
		return nil
	}
	return &Gate{db: t.h.DB, g: g, q: g.gateStatements(), log: log,
		waits: make(chan struct{}, maxGateWaits),
		want:  make(map[string]int), kick: make(chan struct{}, 1)}
}

// room returns how many sessions of the pool gates may take: a capped
// pool keeps two for the Locker's own statements, and half the rest.
func (g *Gate) room() int {
	n := g.db.Stats().MaxOpenConnections
	if n == 0 {
		return maxGateWaits + 1
	}
	return max(n-2, 0) / 2
}

// Arm asks for key's gate to be kept: the caller holds key's row now. It
// returns at once; the gate session takes the gate shortly after.
func (g *Gate) Arm(key string) { g.change(key, 1) }

// Disarm ends an Arm: called after the row's release committed, or once
// the row is no longer the caller's.
func (g *Gate) Disarm(key string) { g.change(key, -1) }

func (g *Gate) change(key string, by int) {
	name := g.g.gateName(key)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || (by > 0 && g.room() < 1) {
		return
	}
	if by < 0 && g.want[name] == 0 {
		return // its Arm was refused for want of room
	}
	if n := g.want[name] + by; n > 0 {
		g.want[name] = n
	} else {
		delete(g.want, name)
	}
	if !g.running && len(g.want) > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		g.running, g.stop = true, cancel
		g.wg.Add(1)
		go g.run(ctx)
	}
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Close lets go of every gate and gives the gate session back; it waits
// for the gate goroutine to end.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.want = map[string]int{}
	if g.stop != nil {
		g.stop()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// run keeps the gates wanted on one session until none has been wanted
// for gateLinger, or Close.
func (g *Gate) run(ctx context.Context) {
	defer g.wg.Done()
	var conn *sql.Conn
	held := map[string]bool{}
	drop := func(err error) {
		// A session in doubt is discarded, never pooled with gates kept.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		conn, held = nil, map[string]bool{}
		if err != nil && ctxend.Err(ctx) == nil {
			g.log.Info("sqllock: lock table gate session lost", "error", err.Error())
		}
	}
	defer func() {
		if conn == nil {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(sctx, g.q.all); err != nil {
			drop(nil)
			return
		}
		conn.Close()
	}()
	e := backoff.Exp{Min: time.Millisecond, Max: 100 * time.Millisecond}
	linger := time.NewTimer(gateLinger)
	defer linger.Stop()
	for ctx.Err() == nil {
		g.mu.Lock()
		want := make(map[string]bool, len(g.want))
		for n := range g.want {
			want[n] = true
		}
		g.mu.Unlock()
		retry := false
		if err := g.sync(ctx, &conn, held, want, &retry); err != nil {
			if conn != nil {
				drop(err)
			}
			retry = true
		}
		var pause <-chan time.Time
		if retry {
			pause = time.After(e.Next())
		} else {
			e.Reset()
		}
		var idle <-chan time.Time
		if len(want) == 0 && !retry {
			linger.Reset(gateLinger)
			idle = linger.C
		}
		select {
		case <-g.kick:
		case <-pause:
		case <-idle:
			g.mu.Lock()
			if len(g.want) == 0 {
				g.running = false
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
		case <-ctx.Done():
		}
	}
}

// sync makes the session keep exactly the gates in want: lets go of the
// others first, then takes the missing ones. retry is set when a gate was
// kept by another session (a waiter passing through it).
func (g *Gate) sync(ctx context.Context, conn **sql.Conn, held, want map[string]bool, retry *bool) error {
	for n := range held {
		if !want[n] {
			if _, err := (*conn).ExecContext(ctx, g.q.disarm, n); err != nil {
				return err
			}
			delete(held, n)
		}
	}
	for n := range want {
		if held[n] {
			continue
		}
		if *conn == nil {
			c, err := g.db.Conn(ctx)
			if err != nil {
				return err
			}
			*conn = c
		}
		var got sql.NullInt64
		if err := (*conn).QueryRowContext(ctx, g.q.arm, n).Scan(&got); err != nil {
			return err
		}
		if got.Int64 == 1 {
			held[n] = true
		} else {
			*retry = true
		}
	}
	return nil
}

// errNoGate: the wait could not block in the server.
var errNoGate = errors.New("rowlease: no gate session")

// Wait blocks in the server on key's gate for up to d, on a session of its
// own, and reports whether it got the gate (let go of at once in the same
// statement): its holder let go of it, or nobody kept it. A false with a
// nil error means d passed. When ctx ends first, the statement is killed
// on the server and its session discarded before Wait returns ctx.Err().
func (g *Gate) Wait(ctx context.Context, key string, d time.Duration) (bool, error) {
	name := g.g.gateName(key)
	select {
	case g.waits <- struct{}{}:
		defer func() { <-g.waits }()
	default:
		return false, errNoGate
	}
	if len(g.waits) > g.room()-1 {
		return false, errNoGate
	}
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return false, errors.Join(errNoGate, err)
	}
	var id int64
	if err := conn.QueryRowContext(ctx, g.q.connID).Scan(&id); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return false, errors.Join(errNoGate, err)
	}
	type result struct {
		got bool
		err error
	}
	done := make(chan result, 1)
	// Not ctx: the driver would close the socket, which a statement
	// waiting for a named lock does not notice. The timeout is a backstop;
	// the server's own (d) ends the wait first.
	sctx, scancel := context.WithTimeout(context.Background(), d+lease.ReleaseTimeout)
	defer scancel()
	go func() {
		var got, let sql.NullInt64
		err := conn.QueryRowContext(sctx, g.q.wait, name, d.Seconds(), name).Scan(&got, &let)
		done <- result{got.Int64 == 1, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return false, r.err
		}
		conn.Close()
		return r.got, nil
	case <-ctx.Done():
	}
	kctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	_, kerr := g.db.ExecContext(kctx, fmt.Sprintf(g.q.kill, id))
	cancel()
	if kerr != nil {
		// Return now rather than at the wait's timeout: the driver drops
		// the socket, and the server ends the statement at its timeout.
		g.log.Warn("sqllock: could not interrupt a gate wait; the server ends it at its timeout", "error", kerr.Error())
		scancel()
	}
	<-done
	// Killed, or about to finish: the session may still carry the kill or
	// the gate, so it is not pooled again.
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	return false, ctx.Err()
}
