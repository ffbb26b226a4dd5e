package locktable

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/internal/lease"
)

// A turn gate hands a PostgreSQL key from holder to waiter inside the
// server, with the take riding behind the wait: the waiter's session asks
// for the key's gate (a session advisory lock) and, in the same round
// trip, runs its take the moment the server grants it; the holder keeps
// the gate on that session while it holds the row, and its release and
// the gate's unlock go out together, the unlock after the release's
// commit. A turn then costs one durable commit and no client round trip
// between a release and the next take, where pollers pay two commits and
// a poll (docs/performance.md). The server queues the waits in the order
// asked, so the key goes round in that order too, across processes.
//
// The row stays the only truth. A gate says "look at the row now": the
// take behind it is an ordinary take, refused if the row is held (a
// holder that keeps no gate, such as a build without gates, a plain
// take, or one whose gate session died). A waiter that got the gate and
// was refused keeps it, first in line, and looks again on the wake-ups
// it has without gates (announcements, calls, its pause); those behind
// it wait in the server and send nothing. Every wait in the server is
// bounded by lock_timeout (the waiting loop's bound, a second by
// default): a gate kept by a holder paused past its lease, or by a
// session whose client is gone, costs a waiter at most that before it
// looks at the row as a poll would. The take runs after the wait whether
// or not the gate came (a Sync between them), so a wait that timed out
// still looks.
//
// The gates are session advisory locks in PostgreSQL's two-key space
// (pg_advisory_lock(int4, int4)), which never meets the one-key space the
// advisory strategy and the migrations use. Two keys whose digests
// collide share a gate: a waiter of one may wait behind a holder of the
// other, at most the bound; neither is ever held wrongly.
//
// Each gated wait and each gated hold pins one pooled session, at most
// maxGateWaits per Table at once, and the Gates of a capped pool share
// its budget (budget); beyond them a waiter takes as without gates. A
// transaction pooler cannot carry a session lock: a Table with
// Config.Unprepared has no turn gates, nor has one on another driver
// than pgx's.

// TurnGate is one session that waits for, and then keeps, the turn gate
// of one key (see above): a waiter first in line, or a holder of the row.
// Its methods are not safe for concurrent use.
type TurnGate struct {
	t    *Table
	s    *postgresStore
	key  string
	conn *sql.Conn
	pc   *pgx.Conn
	kept bool // the session keeps the gate
}

// gateIDs are the two int4 keys of key's gate in table.
func gateIDs(table, key string) (int32, int32) {
	h := sha256.Sum256([]byte("sqllock.turn\x00" + table + "\x00" + key))
	return int32(binary.BigEndian.Uint32(h[0:4])), int32(binary.BigEndian.Uint32(h[4:8]))
}

// Turn gate statements: the wait is bounded by a lock_timeout local to
// its implicit transaction, set in a subquery evaluated before the lock;
// the unlock lets go of every lock of the session, which keeps one gate.
const (
	pgGateWait = `SELECT pg_advisory_lock($1::int4, $2::int4) FROM (SELECT set_config('lock_timeout', $3::text, true) OFFSET 0) AS bounded`
	pgGateLet  = `SELECT pg_advisory_unlock_all()`
)

// TurnGates reports whether the Table can hand keys over by turn gates:
// PostgreSQL through pgx's driver, statements prepared (no transaction
// pooler), default order (fair order hands over by grants).
func (t *Table) TurnGates() bool {
	s, ok := t.st.(*postgresStore)
	return ok && t.gates != nil && !s.pgx.off.Load() // Open made gates only where they serve
}

// Hot reports whether a take of key was refused lately in this Table: a
// key likely held when tried, whose first try may as well wait at its gate.
func (t *Table) Hot(key string) bool {
	s, ok := t.st.(*postgresStore)
	return ok && s.rows.refusedLately(key)
}

// ErrNoTurnGate: GateTake could not pin a session for the gate, and did
// nothing.
var ErrNoTurnGate = errNoGate

// turnGates are a Table's turn gate sessions in use.
type turnGates struct {
	b     *budget
	slots chan struct{} // a token per session pinned
}

// GateTake runs one take of c behind key's turn gate: with g nil, on a
// session of its own that first waits up to d for the gate; with g (the
// caller's, kept from an earlier GateTake), on g's session without a
// wait. It returns the session when it keeps the gate, for the caller to
// keep while it holds the row (TurnGate.Release) or waits first in line,
// and to let go of (TurnGate.Let) otherwise; nil when it does not. It
// returns errNoGate, having done nothing, where no session can be
// pinned now. When ctx ends during the wait, GateTake returns ctx.Err()
// at once; the wait is interrupted on the server, and whatever the take
// behind it won is given back, in the background (Close waits for it).
func (t *Table) GateTake(ctx context.Context, c Claim, d time.Duration, g *TurnGate) (Attempt, *TurnGate, error) {
	if g != nil {
		// Not cut short by ctx: a take cut off in flight may still commit.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.ReleaseTimeout)
		a, err := g.take(sctx, c, 0)
		cancel()
		if err != nil {
			g.drop()
			if c.Fresh && outcomeUnknown(err) {
				t.giveBack(c, 0)
			}
			return a, nil, err
		}
		return a, g, nil
	}
	s, ok := t.st.(*postgresStore)
	if !ok || t.gates == nil || s.pgx.off.Load() {
		return Attempt{Remaining: -1}, nil, errNoGate
	}
	select {
	case t.gates.slots <- struct{}{}:
	default:
		return Attempt{Remaining: -1}, nil, errNoGate
	}
	if !t.gates.b.take(true) {
		<-t.gates.slots
		return Attempt{Remaining: -1}, nil, errNoGate
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.gates.b.put(true)
		<-t.gates.slots
		return Attempt{Remaining: -1}, nil, errClosed
	}
	t.bg.Add(2) // the wait, and what interrupts it
	t.mu.Unlock()
	g = &TurnGate{t: t, s: s, key: c.Key}
	type result struct {
		a   Attempt
		err error
	}
	done := make(chan result) // unbuffered: a result is either taken or given back
	gaveUp := make(chan struct{})
	pid := make(chan uint32, 1)
	ended, quiet := make(chan struct{}), make(chan struct{})
	go func() { // interrupts the wait of a caller gone, until it ended
		defer t.bg.Done()
		defer close(quiet)
		select {
		case <-gaveUp:
		case <-ended:
			return
		}
		var id uint32
		select {
		case id = <-pid:
		case <-ended:
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			// Again while it runs: a cancel that comes before the
			// statement is ignored. The session stays pinned until
			// this stops, so no cancel reaches another's statement.
			ictx, cancel := context.WithTimeout(context.Background(), gateBound)
			_, _ = t.h.DB.ExecContext(ictx, `SELECT pg_cancel_backend($1)`, int64(id))
			cancel()
			select {
			case <-ended:
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer t.bg.Done()
		// Detached: the wait ends by its lock_timeout, or by the
		// interrupt; the statement's outcome is then read whole.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d+lease.ReleaseTimeout)
		a, err := g.open(sctx, c, d, pid)
		cancel()
		if err != nil && c.Fresh && outcomeUnknown(err) {
			t.giveBack(c, 0) // before the caller may try again as the same owner
		}
		close(ended)
		<-quiet
		select {
		case done <- result{a, err}:
			return
		case <-gaveUp:
		}
		switch {
		case err == nil && a.Won:
			rctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
			_ = g.Release(rctx, c.Owner, a.Token, 0)
			cancel()
			if t.cfg.Freed != nil {
				t.cfg.Freed(c.Key)
			}
		case g.conn != nil:
			g.Let()
		}
	}()
	select {
	case r := <-done:
		if r.err != nil || !g.kept {
			if g.conn != nil {
				g.Let()
			}
			return r.a, nil, r.err
		}
		return r.a, g, nil
	case <-ctx.Done():
		close(gaveUp)
		return Attempt{Remaining: -1}, nil, ctx.Err()
	}
}

// open pins the session, waits up to d for the gate and runs the take
// behind it; pid receives the session's backend id before the wait.
func (g *TurnGate) open(ctx context.Context, c Claim, d time.Duration, pid chan<- uint32) (Attempt, error) {
	conn, err := g.t.h.DB.Conn(ctx)
	if err != nil {
		g.unpin()
		return Attempt{Remaining: -1}, errors.Join(errNoGate, err)
	}
	g.conn = conn
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			g.s.pgx.off.Store(true) // TurnGates says no from now on
			return errNotPgx
		}
		g.pc = pc.Conn()
		return nil
	})
	if err != nil {
		g.unpinned(true) // a sound session of another driver
		return Attempt{Remaining: -1}, errors.Join(errNoGate, err)
	}
	pid <- g.pc.PgConn().PID()
	a, err := g.take(ctx, c, d)
	if err != nil {
		g.drop()
	}
	return a, err
}

// take runs c's take on the session, behind a wait of up to d for the
// gate where d > 0.
func (g *TurnGate) take(ctx context.Context, c Claim, d time.Duration) (Attempt, error) {
	t, s := g.t, g.s
	if err := t.srv.Check(ctx); err != nil {
		return Attempt{Remaining: -1}, err
	}
	if c.Listening {
		c.caller = t.id
	}
	calls := t.queuesCalls(c)
	if calls {
		t.takingCall(c.Key)
	}
	a, got, err := s.gateTake(ctx, g.pc, t.cfg.Table, c, d)
	if calls {
		t.tookCall(c.Key, err == nil && a.Won)
	}
	if err != nil {
		return Attempt{Remaining: -1}, err
	}
	g.kept = g.kept || got
	if a.Won {
		a.Host, a.Remaining = "", 0
	}
	return a, nil
}

// Release gives the hold back on the gate's session and, in the same
// round trip after the release committed, lets go of the gate: the next
// waiter's take runs at once. Where the session fails, the release runs
// on the pool (Table.Release) and the session is discarded, which lets go
// of its gate. It returns what Table.Release does.
func (g *TurnGate) Release(ctx context.Context, owner string, token int64, keep time.Duration) error {
	n, sound, err := g.s.gateRelease(ctx, g.pc, g.key, owner, token, keep)
	g.unpinned(err == nil && sound)
	if err != nil {
		return g.t.Release(ctx, g.key, owner, token, keep)
	}
	if n == 0 {
		return errRowLost
	}
	return nil
}

// Let lets go of the gate and gives the session back: the waiter gave
// up, or the hold ended without a release of its own.
func (g *TurnGate) Let() {
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	_, err := g.pc.Exec(ctx, pgGateLet)
	g.unpinned(err == nil)
}

// drop discards the session: its gate goes with it.
func (g *TurnGate) drop() { g.unpinned(false) }

// unpinned gives the session back to the pool (ok) or discards it, and
// its place in the budget.
func (g *TurnGate) unpinned(ok bool) {
	if g.conn == nil {
		return
	}
	if !ok {
		_ = g.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	g.conn.Close()
	g.conn, g.pc, g.kept = nil, nil, false
	g.unpin()
}

// unpin gives back the session's place in the budget.
func (g *TurnGate) unpin() {
	g.t.gates.b.put(true)
	<-g.t.gates.slots
}

// gateTake runs c's take on pc; with d > 0, behind a wait of up to d for
// the gate of c.Key, in one round trip. got: pc keeps the gate now.
func (s *postgresStore) gateTake(ctx context.Context, pc *pgx.Conn, table string, c Claim, d time.Duration) (a Attempt, got bool, err error) {
	args := []any{c.Key, c.Owner, c.Host, micros(c.TTL)}
	if s.announce {
		args = append(args, c.caller)
	}
	if d <= 0 {
		a, err := s.fullTake(ctx, pc, c.Key, args)
		return a, false, err
	}
	s.rows.saw(c.Key, true) // a key waited for at its gate is hot
	wait, err := pc.Prepare(ctx, pgGateWait, pgGateWait)
	if err != nil {
		return Attempt{Remaining: -1}, false, err
	}
	// Behind the gate the row is most likely free: its plain update
	// first, the upsert only where it changed nothing.
	take, err := pc.Prepare(ctx, s.q.takeFree, s.q.takeFree)
	if err != nil {
		return Attempt{Remaining: -1}, false, err
	}
	k1, k2 := gateIDs(table, c.Key)
	ms := strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
	p := pc.PgConn().StartPipeline(ctx)
	p.SendQueryStatement(wait, [][]byte{itoa(int64(k1)), itoa(int64(k2)), []byte(ms)}, nil, nil)
	p.SendPipelineSync()
	p.SendQueryStatement(take, textArgs(args), nil, nil)
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		p.Close()
		return Attempt{Remaining: -1}, false, err
	}
	res, werr := p.GetResults()
	if r, ok := res.(*pgconn.ResultReader); ok {
		_, werr = r.Close()
	}
	var pgErr *pgconn.PgError
	switch {
	case werr == nil:
		got = true
	case errors.As(werr, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014"):
		// lock_timeout, or the interrupt of a caller gone: the take
		// still runs, as a poll.
	default:
		p.Close()
		return Attempt{Remaining: -1}, false, werr
	}
	if _, err := p.GetResults(); err != nil { // the wait's Sync
		p.Close()
		return Attempt{Remaining: -1}, got, err
	}
	var token int64
	res, err = p.GetResults()
	found := false
	if r, ok := res.(*pgconn.ResultReader); ok {
		if r.NextRow() {
			found = true
			err = scanText(r.Values(), &token)
		}
		if _, cerr := r.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Attempt{Remaining: -1}, got, err
	}
	if found {
		return Attempt{Won: true, Token: token, Holds: 1}, got, nil
	}
	a, err = s.fullTake(ctx, pc, c.Key, args)
	return a, got, err
}

// fullTake runs the upsert take (take*.sql) with args on pc.
func (s *postgresStore) fullTake(ctx context.Context, pc *pgx.Conn, key string, args []any) (Attempt, error) {
	var a Attempt
	var left int64
	err := pc.QueryRow(ctx, s.q.take, args...).Scan(&a.Won, &a.Token, &a.Holds, &a.Host, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		s.rows.saw(key, true) // the holder's row is newer than the snapshot
		return Attempt{Remaining: -1}, nil
	}
	if err != nil {
		return Attempt{Remaining: -1}, err
	}
	s.rows.saw(key, !a.Won)
	a.Remaining = remaining(left)
	return a, nil
}

// gateRelease runs the release on pc and, after its commit, lets go of
// every gate of pc, in one round trip; it returns the rows the release
// changed, and sound false where the unlock failed (the session, in
// doubt, is to be discarded, which lets go of its gates).
func (s *postgresStore) gateRelease(ctx context.Context, pc *pgx.Conn, key, owner string, token int64, keep time.Duration) (n int64, sound bool, err error) {
	args := []any{key, owner, token, micros(keep)}
	if s.announce {
		args = append(args, s.channel, s.call)
	}
	n, err, letErr := execThen(ctx, pc, s.q.release, textArgs(args), pgGateLet, nil)
	return n, letErr == nil, err
}

// execThen runs q with args on c and, in the same round trip but in a
// transaction of its own (a Sync between), then with thenArgs. It
// returns the rows q changed and q's error, and apart from them the
// error of then or of the pipeline's end.
func execThen(ctx context.Context, c *pgx.Conn, q string, args [][]byte, then string, thenArgs [][]byte) (n int64, err, thenErr error) {
	first, err := c.Prepare(ctx, q, q)
	if err != nil {
		return 0, err, nil
	}
	second, err := c.Prepare(ctx, then, then)
	if err != nil {
		return 0, err, nil
	}
	p := c.PgConn().StartPipeline(ctx)
	p.SendQueryStatement(first, args, nil, nil)
	p.SendPipelineSync()
	p.SendQueryStatement(second, thenArgs, nil, nil)
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		return 0, err, p.Close()
	}
	res, err := p.GetResults() // q's, or its error
	if r, ok := res.(*pgconn.ResultReader); ok {
		var tag pgconn.CommandTag
		tag, err = r.Close()
		n = tag.RowsAffected()
	}
	return n, err, p.Close() // reads the rest
}

func itoa(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// textArgs encodes a statement's arguments (strings and integers) in
// PostgreSQL's text format, for a pipeline.
func textArgs(args []any) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = []byte(v)
		case int64:
			out[i] = itoa(v)
		case int:
			out[i] = itoa(int64(v))
		}
	}
	return out
}

// scanText reads a row in PostgreSQL's text format into dest (*bool,
// *int64, *string).
func scanText(vals [][]byte, dest ...any) error {
	if len(vals) < len(dest) {
		return errors.New("locktable: short row")
	}
	for i, d := range dest {
		v := vals[i]
		switch p := d.(type) {
		case *bool:
			*p = string(v) == "t"
		case *int64:
			if v == nil {
				*p = 0
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return err
			}
			*p = n
		case *string:
			*p = string(v)
		}
	}
	return nil
}
