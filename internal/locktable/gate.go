package locktable

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/lease"
)

// A gate is a wake-up for waiters in other processes where the dialect has
// no announcements (MariaDB here; SQLite's are files, gatefile.go): a server-side named lock per key that the
// holding Locker keeps, on one session of its own, for as long as it holds
// the key's row, and lets go of only after the row's release committed. A
// waiter blocks in the server on the gate and is woken by the server the
// moment the holder lets go, then claims the row as always. The row stays
// the only source of truth: a gate only says "look again", so a holder
// whose gate session died still holds by its row, and a waiter that got a
// gate at once (nobody kept it) finds the key held and polls as before.
//
// Every wait is bounded (by its caller: the waiting loop's bound): one
// that hears nothing ends by itself and its waiter looks at the row again.
// So a gate kept by a holder that lost its key (to an operator's force
// release, which it learns of at its next renewal) costs a waiter at most
// the bound, and so does a kill that missed. A cancelled wait closes its
// socket, discards its session and kills it on the server (KILL
// CONNECTION from another session of the pool; one's own sessions need no
// privilege): unlike KILL QUERY, that also ends a session whose wait has
// not reached the server yet, which MariaDB would otherwise run in full.
//
// A key's line orders its waiters across processes: the first waiter of
// each Locker that finds the key held asks for the line's named lock
// (Line), which the server grants one session at a time in the order
// asked, and keeps it until it took the key. Only the first in line
// polls or blocks on the gate; the others wait in the server and send
// nothing. Like a gate, the line only says who looks at the row: a wait
// in it ends by itself at the bound, and its waiter then polls as
// without a line.
//
// Sessions pinned: one per Locker for the gates of every key it holds (one
// session can keep many named locks), taken while it holds something and
// given back to the pool two seconds after its last key; and per key
// waited for, per Locker, one for its place in line and one while the
// first in line blocks on the gate (the others of the same Locker wait for
// in-process wake-ups), at most maxGateWaits at once. The Gates of every Locker on one pool capped
// by SetMaxOpenConns share a budget (budget): half the connections above
// two, so the others stay free for takes, renewals and releases. Where the
// budget is spent, a holder keeps no gate and a waiter polls.

// maxGateWaits bounds the waits and places in line a Gate has in the
// server at once, each on a session of its own; further waiters pause and
// poll as without gates.
const maxGateWaits = 4

// gateBound paces the Gate's own retries and bounds the kill of a
// cancelled wait. The waits themselves are bounded by their caller (the
// waiting loop's bound, 1s by default).
const gateBound = time.Second

// gateLinger keeps the gate session open this long after the last gate is
// let go, so a Locker taking keys in a loop does not reconnect each time.
const gateLinger = 2 * time.Second

// gater is a store whose dialect can gate keys.
type gater interface {
	// gateName is the server-wide name of key's gate in this table.
	gateName(key string) string
	lineName(key string) string // the server-wide name of key's line (LineName)
	gateStatements() gateSQL
}

// gateSQL are a dialect's gate statements.
type gateSQL struct {
	arm    string // (name) -> 1 kept, 0 kept by another session (a waiter passing through)
	disarm string // (name)
	all    string // lets go of every gate of the session
	wait   string // (name, seconds, name) -> 1 when got (and let go at once), else 0 or NULL
	line   string // (name, seconds) -> 1 when got (kept), else 0 or NULL
	connID string // -> this session's id, for kill
	kill   string // fmt verb %d: the session id to end
	gone   string // (session id) -> 0 once the server has ended the session
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
	file *fileGates // SQLite's: pipes beside the database file; the rest is MariaDB's

	db  *sql.DB
	b   *budget
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

// Gate returns the Table's Gate, or nil where the dialect has none. Close
// it when done: it counts in its pool's budget of gate sessions.
func (t *Table) Gate(log *slog.Logger) *Gate {
	if fg, ok := t.st.(fileGater); ok {
		if !fileGateSupported {
			return nil
		}
		return &Gate{file: newFileGates(t.h.DB, t.cfg.Table, fg.schema(t.cfg.Table))}
	}
	g, ok := t.st.(gater)
	if !ok || g.gateStatements().wait == "" {
		return nil
	}
	return &Gate{db: t.h.DB, b: budgetFor(t.h.DB), g: g, q: g.gateStatements(), log: log,
		waits: make(chan struct{}, maxGateWaits),
		want:  make(map[string]int), kick: make(chan struct{}, 1)}
}

// budget counts the gate sessions of one pool for every Gate on it:
// Lockers sharing a capped pool that each sized their gates as if alone
// pinned every connection between them, and their renewals starved.
type budget struct {
	db   *sql.DB
	refs int // Gates on db, under budgetsMu

	mu   sync.Mutex
	keep int           // sessions keeping gates
	wait int           // sessions waiting on gates
	ids  map[any]int64 // server session ids of pooled connections, by driver connection
}

// maxIDs bounds budget.ids: the pool closes connections without a word,
// so the map is emptied when full rather than kept exact.
const maxIDs = 64

var (
	budgetsMu sync.Mutex
	budgets   = map[*sql.DB]*budget{}
)

// budgetFor returns db's budget, counting one more Gate on it.
func budgetFor(db *sql.DB) *budget {
	budgetsMu.Lock()
	defer budgetsMu.Unlock()
	b := budgets[db]
	if b == nil {
		b = &budget{db: db}
		budgets[db] = b
	}
	b.refs++
	return b
}

// drop counts one Gate fewer, and forgets the budget with the last.
func (b *budget) drop() {
	budgetsMu.Lock()
	defer budgetsMu.Unlock()
	if b.refs--; b.refs == 0 {
		delete(budgets, b.db)
	}
}

// limit is how many gate sessions the pool lends at once: half of its
// cap's connections above two (read each time, as the cap may change), or
// -1 for an uncapped pool.
func (b *budget) limit() int {
	n := b.db.Stats().MaxOpenConnections
	if n == 0 {
		return -1
	}
	return max(n-2, 0) / 2
}

// take reserves a session for keeping gates, or for a wait. While no
// session keeps gates, waits leave one for that: a kept gate wakes every
// waiter, a wait only its own.
func (b *budget) take(wait bool) bool {
	lim := b.limit()
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.keep + b.wait
	if wait && b.keep == 0 {
		used++
	}
	if lim >= 0 && used >= lim {
		return false
	}
	if wait {
		b.wait++
	} else {
		b.keep++
	}
	return true
}

// put gives back a session take reserved.
func (b *budget) put(wait bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wait {
		b.wait--
	} else {
		b.keep--
	}
}

// sessionID returns the server's id of conn's session: a wait is killed
// by it. It is asked once per connection of the pool, not once per wait.
func (b *budget) sessionID(ctx context.Context, conn *sql.Conn, q string) (int64, error) {
	var dc any
	_ = conn.Raw(func(c any) error { dc = c; return nil })
	if reflect.ValueOf(dc).Kind() != reflect.Pointer {
		dc = nil // a key that could not be hashed, or would not name one connection
	}
	b.mu.Lock()
	id, ok := b.ids[dc]
	b.mu.Unlock()
	if ok && dc != nil {
		return id, nil
	}
	if err := conn.QueryRowContext(ctx, q).Scan(&id); err != nil || dc == nil {
		return id, err
	}
	b.mu.Lock()
	if len(b.ids) >= maxIDs || b.ids == nil {
		b.ids = make(map[any]int64)
	}
	b.ids[dc] = id
	b.mu.Unlock()
	return id, nil
}

// discard drops conn from the pool, and its id with it.
func (b *budget) discard(conn *sql.Conn) {
	_ = conn.Raw(func(c any) error {
		if reflect.ValueOf(c).Kind() == reflect.Pointer {
			b.mu.Lock()
			delete(b.ids, c)
			b.mu.Unlock()
		}
		return driver.ErrBadConn
	})
}

// Arm asks for key's gate to be kept: the caller holds key's row now. It
// returns at once; the gate session takes the gate shortly after.
func (g *Gate) Arm(key string) {
	if g.file != nil {
		g.file.arm(key)
		return
	}
	g.change(key, 1)
}

// Disarm ends an Arm: called after the row's release committed, or once
// the row is no longer the caller's.
func (g *Gate) Disarm(key string) {
	if g.file != nil {
		g.file.disarm(key)
		return
	}
	g.change(key, -1)
}

// Knows reports whether a Wait tells a gate nobody keeps from a holder
// that let go (file gates: it returns errNoGate for the first), so its
// caller may wait on a holder of any age; MariaDB's Wait gets a gate
// nobody keeps at once, as if let through.
func (g *Gate) Knows() bool { return g.file != nil }

func (g *Gate) change(key string, by int) {
	name := g.g.gateName(key)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || (by > 0 && g.b.limit() == 0) {
		return // a pool too small to lend a gate session
	}
	if by < 0 && g.want[name] == 0 {
		return // its Arm was refused
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
// for the gate goroutine to end. Later calls do nothing.
func (g *Gate) Close() {
	if g.file != nil {
		g.file.close()
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.want = map[string]int{}
	if g.stop != nil {
		g.stop()
	}
	g.mu.Unlock()
	g.wg.Wait()
	g.b.drop()
}

// run keeps the gates wanted on one session until none has been wanted
// for gateLinger, or Close. The session counts in the pool's budget while
// it is open.
func (g *Gate) run(ctx context.Context) {
	defer g.wg.Done()
	var conn *sql.Conn
	held := map[string]bool{}
	drop := func(err error) {
		// A session in doubt is discarded, never pooled with gates kept.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		g.b.put(false)
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
		g.b.put(false)
	}()
	// A waiter passing through keeps a gate for an instant; one kept for
	// longer is an old holder's, freed by an operator, kept until its
	// renewal finds out. Retries slow to one a bound meanwhile.
	e := backoff.Exp{Min: time.Millisecond, Max: gateBound}
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
// kept by another session (a waiter passing through it, or a holder that
// has not learnt yet that its key was freed), or when the pool's budget
// lends no session now.
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
			if !g.b.take(false) {
				*retry = true
				return nil
			}
			c, err := g.db.Conn(ctx)
			if err != nil {
				g.b.put(false)
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
var errNoGate = errors.New("locktable: no gate session")

// Wait blocks in the server on key's gate for up to d (the caller's bound
// on one wait), on a session of its own, and reports whether it got the
// gate (let go of at once in the same statement): its holder let go of it,
// or nobody kept it. A false with a nil error means d passed, and the
// caller looks at the row again. When ctx ends first, the session is
// killed on the server and discarded before Wait returns ctx.Err().
func (g *Gate) Wait(ctx context.Context, key string, d time.Duration) (bool, error) {
	if g.file != nil {
		return g.file.wait(ctx, key, d)
	}
	name := g.g.gateName(key)
	got, conn, err := g.block(ctx, g.q.wait, []any{name, d.Seconds(), name}, d, false)
	if conn != nil {
		conn.Close()
	}
	return got, err
}

// Line puts the caller in key's line, the waiters of every process that
// found the key held, and blocks, on a session of its own and up to d,
// until it is first: the server lets one session at a time have the
// line's named lock, in the order they asked for it. It returns leave,
// which gives the place to the next in line; the caller calls it once it
// took the key or gave up. A nil leave with a nil error means d passed.
// When ctx ends first, it returns as Wait does.
func (g *Gate) Line(ctx context.Context, key string, d time.Duration) (leave func(), err error) {
	if g.file != nil {
		return nil, errNoGate // SQLite's gates have no line: its waiters wait on the gate
	}
	name := g.g.lineName(key)
	got, conn, err := g.block(ctx, g.q.line, []any{name, d.Seconds()}, d, true)
	if !got {
		if conn != nil {
			conn.Close()
		}
		return nil, err
	}
	let := func() {
		defer g.b.put(true)
		defer func() { <-g.waits }()
		ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(ctx, g.q.disarm, name); err != nil {
			g.b.discard(conn) // the server lets go of it with the session
			return
		}
		conn.Close()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// In the background, but for a closed Gate: the next in line
			// takes its turn a round trip later either way, and the
			// caller's take is done.
			g.mu.Lock()
			if g.closed {
				g.mu.Unlock()
				let()
				return
			}
			g.wg.Add(1) // under g.mu: never after Close's Wait began
			g.mu.Unlock()
			go func() {
				defer g.wg.Done()
				let()
			}()
		})
	}, nil
}

// LineName is the server-wide name of the named lock that orders the
// waiters for key in the lock table named table (see GateName).
func LineName(table, key string) string {
	h := sha256.Sum256([]byte(table + "\x00" + key))
	return "sqllock.line." + hex.EncodeToString(h[:20])
}

// block runs q (its first column 1 when the named lock was got, one
// column more when !keep) with args on a session of its own, counted in
// the Gate's waits and the pool's budget, and ends it as Wait describes
// when ctx ends first; d bounds the wait in the server. It returns the
// session, for the caller to close, unless the wait failed or ended.
// keep: a named lock got is kept, and so are the session's reservations,
// until the caller gives them back.
func (g *Gate) block(ctx context.Context, q string, args []any, d time.Duration, keep bool) (got bool, _ *sql.Conn, _ error) {
	select {
	case g.waits <- struct{}{}:
	default:
		return false, nil, errNoGate
	}
	if !g.b.take(true) {
		<-g.waits
		return false, nil, errNoGate
	}
	kept := false
	defer func() {
		if !kept {
			g.b.put(true)
			<-g.waits
		}
	}()
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return false, nil, errors.Join(errNoGate, err)
	}
	id, err := g.b.sessionID(ctx, conn, g.q.connID)
	if err != nil {
		g.b.discard(conn)
		return false, nil, errors.Join(errNoGate, err)
	}
	type result struct {
		got bool
		err error
	}
	// Prepared before the wait and beyond the cancel below: the driver
	// logs a socket closed under a statement it is preparing (one in a
	// few hundred cancels did), and keeps quiet about one closed under a
	// statement it runs.
	pctx, pcancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	stmt, err := conn.PrepareContext(pctx, q)
	pcancel()
	if err != nil {
		g.b.discard(conn)
		return false, nil, errors.Join(errNoGate, err)
	}
	done := make(chan result, 1)
	// Not ctx: the driver would close the socket when it ends, and the
	// wait is ended below, in order. The timeout is a backstop; the
	// server's own (d) ends the wait first.
	sctx, scancel := context.WithTimeout(context.Background(), d+lease.ReleaseTimeout)
	defer scancel()
	go func() {
		var got, let sql.NullInt64
		dest := []any{&got, &let}
		if keep {
			dest = dest[:1]
		}
		err := stmt.QueryRowContext(sctx, args...).Scan(dest...)
		stmt.Close()
		done <- result{got.Int64 == 1, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			g.b.discard(conn)
			return false, nil, r.err
		}
		kept = keep && r.got
		return r.got, conn, nil
	case <-ctx.Done():
	}
	// The client lets go first: the driver closes the socket and says
	// nothing of it, as it would of a socket the server closed under it.
	// A session whose wait never went out ends at its discard. One whose
	// wait reached the server does not notice the socket close, so the
	// session is killed; KILL CONNECTION, not KILL QUERY, which MariaDB
	// forgets when it comes before the statement it aims at.
	scancel()
	<-done
	g.b.discard(conn)
	kctx, cancel := context.WithTimeout(context.Background(), gateBound)
	// An error is an id that ended already, or no session to send the
	// kill from: then the wait ends at its own timeout, within the bound.
	_, _ = g.db.ExecContext(kctx, fmt.Sprintf(g.q.kill, id))
	cancel()
	g.ended(id)
	return false, nil, ctx.Err()
}

// ended returns once the server has ended the session id, or after
// gateBound: a kill returns before the session it ends is gone.
func (g *Gate) ended(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), gateBound)
	defer cancel()
	e := backoff.Exp{Min: time.Millisecond, Max: 50 * time.Millisecond}
	for {
		var n int64
		if err := g.db.QueryRowContext(ctx, g.q.gone, id).Scan(&n); err != nil || n == 0 {
			return
		}
		select {
		case <-time.After(e.Next()):
		case <-ctx.Done():
			return
		}
	}
}
