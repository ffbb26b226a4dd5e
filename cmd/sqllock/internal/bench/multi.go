package bench

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/internal/dberr"
)

// The multi-client cases use the client model of separate services: every
// client opens its own *sql.DB and its own Locker (or pinned session, on
// the raw side), and the handoff's waiter runs in another process.

// MultiSide is one side (sqllock or raw) of the multi-client cases.
type MultiSide struct {
	OnePerSec  float64 `json:"distinct_1_client_per_sec"`
	ManyPerSec float64 `json:"distinct_n_clients_per_sec"`
	HotPerSec  float64 `json:"hot_key_per_sec"`
	HotServed  int     `json:"hot_key_clients_served"`
	// HotShares is each client's share of the hot key's turns.
	HotShares  []float64 `json:"hot_key_shares"`
	HotBusiest float64   `json:"hot_key_busiest_share"`
	// The wait of an acquisition on the hot key (acquire returned), over
	// every client's turns; waits cut off by the end of the run are left out.
	HotWaitP50MS float64 `json:"hot_key_wait_p50_ms"`
	HotWaitP99MS float64 `json:"hot_key_wait_p99_ms"`
	// The handoff to a waiter in another process.
	HandoffP50MS  float64 `json:"xproc_handoff_p50_ms"`
	HandoffP99MS  float64 `json:"xproc_handoff_p99_ms"`
	HandoffMissed int     `json:"xproc_handoff_missed"`
	// IdleWaiterQPS is the statements a second that one waiter sends
	// while the key stays held.
	IdleWaiterQPS float64 `json:"idle_waiter_queries_per_sec"`
}

type MultiResult struct {
	Clients    int       `json:"clients"`
	RawSQL     string    `json:"raw_sql"`
	Lib        MultiSide `json:"sqllock"`
	Raw        MultiSide `json:"raw"`
	OneRatio   float64   `json:"distinct_1_client_ratio"`
	ManyRatio  float64   `json:"distinct_n_clients_ratio"`
	HotRatio   float64   `json:"hot_key_ratio"`
	IdleWindow float64   `json:"idle_window_s"`
	// Fair is the hot key again with tablelock.WithFairness, where the
	// dialect has it; only its hot-key fields are set.
	Fair      *MultiSide `json:"fair,omitempty"`
	FairRatio float64    `json:"fair_hot_key_ratio,omitempty"`
	// FairSkipped says why the dialect's fair order was not run.
	FairSkipped string `json:"fair_skipped,omitempty"`
	// WithoutToken is the Locker again with advisory.WithoutToken, where
	// the strategy has it: the rates of 1 and n clients and the hot key,
	// run alternated with the other two sides.
	WithoutToken          *MultiSide `json:"without_token,omitempty"`
	WithoutTokenOneRatio  float64    `json:"without_token_distinct_1_client_ratio,omitempty"`
	WithoutTokenManyRatio float64    `json:"without_token_distinct_n_clients_ratio,omitempty"`
	WithoutTokenHotRatio  float64    `json:"without_token_hot_key_ratio,omitempty"`
}

// multiPlan opens the clients of each side on a pool of their own.
type multiPlan struct {
	lib, raw func(ctx context.Context, db *sql.DB) (contender, error)
	// fair, when set, is the lib side in fair order, for the hot key;
	// fairSkipped says why it is not.
	fair        func(ctx context.Context, db *sql.DB) (contender, error)
	fairSkipped string
	// bare, when set, is the lib side drawing no fencing token, for the
	// rates (advisory.WithoutToken).
	bare   func(ctx context.Context, db *sql.DB) (contender, error)
	rawSQL string
	close  func()
}

// rawPollEvery is how often a raw lock-table waiter tries again.
const rawPollEvery = time.Millisecond

// multiPlanFor returns the multi-client plan of strategy name on t, nil
// when it has none.
func multiPlanFor(ctx context.Context, db *sql.DB, t Target, name string) (*multiPlan, error) {
	d, pooler := t.Dialect, t.Pooler
	switch name {
	case "tablelock":
		if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sqllock_bench_raw (lock_key varchar(255) NOT NULL PRIMARY KEY)`); err != nil {
			return nil, fmt.Errorf("creating the raw lock table: %v", err)
		}
		var fair func(context.Context, *sql.DB) (contender, error)
		var fairSkipped string
		switch {
		case d == sqllock.Postgres && pooler:
			fairSkipped = "the next waiter is called by LISTEN, which does not reach a client through a transaction pooler"
		case d == sqllock.Postgres:
			fair = func(_ context.Context, db *sql.DB) (contender, error) {
				return newLockerClient(db, d, false, fairTablelock)
			}
		}
		return &multiPlan{
			lib: func(_ context.Context, db *sql.DB) (contender, error) {
				return newLockerClient(db, d, pooler, lockers.Tablelock)
			},
			raw:         func(ctx context.Context, db *sql.DB) (contender, error) { return openRawTable(ctx, db, d, pooler) },
			fair:        fair,
			fairSkipped: fairSkipped,
			rawSQL: "a bare lock table: " + rawTableSQL(d).take + " / DELETE, " + preparedOnce(pooler) +
				", waiters polling every " + rawPollEvery.String(),
			close: func() {
				ctx, cancel := context.WithTimeout(context.Background(), lockers.CleanupTimeout)
				defer cancel()
				db.ExecContext(ctx, `DROP TABLE IF EXISTS sqllock_bench_raw`)
			},
		}, nil
	case "advisory":
		q, rawSQL := rawAdvisorySQL(d)
		if pooler {
			// Session locks would stay on the proxy's server sessions.
			return &multiPlan{
				lib:    func(_ context.Context, db *sql.DB) (contender, error) { return newAdvisoryTxClient(db, d) },
				raw:    func(_ context.Context, db *sql.DB) (contender, error) { return newRawAdvisoryTx(db, q) },
				rawSQL: "BEGIN; " + q.lockTx + "; COMMIT per turn, " + preparedOnce(pooler) + "; waiters block in the server",
			}, nil
		}
		return &multiPlan{
			lib: func(_ context.Context, db *sql.DB) (contender, error) {
				return newLockerClient(db, d, false, lockers.Advisory)
			},
			bare: func(_ context.Context, db *sql.DB) (contender, error) {
				return newLockerClient(db, d, false, untokenedAdvisory)
			},
			raw:    func(ctx context.Context, db *sql.DB) (contender, error) { return openRawAdvisory(ctx, db, d, q) },
			rawSQL: rawSQL + " on one pinned session per client; waiters block in the server",
		}, nil
	}
	return nil, nil
}

type rawTableStmts struct{ take, free string }

func rawTableSQL(d sqllock.Dialect) rawTableStmts {
	switch d {
	case sqllock.Postgres:
		return rawTableStmts{`INSERT INTO sqllock_bench_raw (lock_key) VALUES ($1) ON CONFLICT DO NOTHING`, `DELETE FROM sqllock_bench_raw WHERE lock_key = $1`}
	case sqllock.MariaDB, sqllock.MySQL:
		return rawTableStmts{`INSERT IGNORE INTO sqllock_bench_raw (lock_key) VALUES (?)`, `DELETE FROM sqllock_bench_raw WHERE lock_key = ?`}
	}
	return rawTableStmts{`INSERT OR IGNORE INTO sqllock_bench_raw (lock_key) VALUES (?)`, `DELETE FROM sqllock_bench_raw WHERE lock_key = ?`}
}

// rawTable is a bare lock table: a row is the lock, a waiter inserts
// again every rawPollEvery.
type rawTable struct {
	take, free *rawStmt
	key        string
}

func openRawTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, unprepared bool) (*rawTable, error) {
	q := rawTableSQL(d)
	r := &rawTable{}
	var err error
	if r.take, err = prepareRaw(ctx, db, q.take, unprepared); err == nil {
		r.free, err = prepareRaw(ctx, db, q.free, unprepared)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rawTable) acquire(ctx context.Context, key string) error {
	for {
		res, err := r.take.exec(ctx, nil, key)
		if err != nil && !dberr.IsRetryable(err) {
			return err
		}
		if err == nil {
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				r.key = key
				return err
			}
		}
		t := time.NewTimer(rawPollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (r *rawTable) release(ctx context.Context) error {
	_, err := r.free.exec(context.WithoutCancel(ctx), nil, r.key)
	return err
}

func (r *rawTable) close() { closeRaw(r.take, r.free) }

// clientPool is one client's *sql.DB and what it opened on it.
type clientPool struct {
	db *sql.DB
	c  contender
}

func openPools(ctx context.Context, t Target, n int, open func(context.Context, *sql.DB) (contender, error)) ([]clientPool, error) {
	var ps []clientPool
	for range n {
		db, err := sql.Open(t.Driver, t.DSN)
		if err != nil {
			return ps, err
		}
		c, err := open(ctx, db)
		if err != nil {
			db.Close()
			return ps, err
		}
		ps = append(ps, clientPool{db, c})
	}
	return ps, nil
}

func closePools(ps []clientPool) {
	for _, p := range ps {
		p.c.close()
		p.db.Close()
	}
}

func contenders(ps []clientPool) []contender {
	out := make([]contender, len(ps))
	for i, p := range ps {
		out[i] = p.c
	}
	return out
}

// benchMulti runs the multi-client cases of strategy name, each side in
// turn, in this run.
func benchMulti(ctx context.Context, t Target, db *sql.DB, name string, cfg Config) (*MultiResult, error) {
	plan, err := multiPlanFor(ctx, db, t, name)
	if err != nil || plan == nil {
		return nil, err
	}
	if plan.close != nil {
		defer plan.close()
	}
	res := &MultiResult{Clients: cfg.Clients, RawSQL: plan.rawSQL, IdleWindow: cfg.Idle.Seconds(), FairSkipped: plan.fairSkipped}
	type sideOf struct {
		open      func(context.Context, *sql.DB) (contender, error)
		out       *MultiSide
		name      string
		ratesOnly bool // no handoff, no idle waiter
	}
	sides := []sideOf{{plan.lib, &res.Lib, "lib", false}}
	if plan.bare != nil {
		res.WithoutToken = &MultiSide{}
		sides = append(sides, sideOf{plan.bare, res.WithoutToken, "bare", true})
	}
	// Raw last: its hot-key waiter cut off by the end of the run loses its
	// pinned session.
	sides = append(sides, sideOf{plan.raw, &res.Raw, "raw", false})
	pools := make([][]clientPool, len(sides))
	defer func() {
		for _, ps := range pools {
			closePools(ps)
		}
	}()
	for i, s := range sides {
		if pools[i], err = openPools(ctx, t, cfg.Clients, s.open); err != nil {
			return nil, err
		}
	}
	// Distinct keys: halves of each side alternate, so that a slower patch
	// of the shared machine does not land on one side only.
	for _, n := range []int{1, cfg.Clients} {
		ops := make([]int, len(sides))
		el := make([]time.Duration, len(sides))
		for range 2 {
			for i := range sides {
				k, e, err := distinctKeys(ctx, contenders(pools[i][:n]), cfg.Duration/2)
				if err != nil {
					return nil, err
				}
				ops[i] += k
				el[i] += e
			}
		}
		for i, s := range sides {
			rate := float64(ops[i]) / el[i].Seconds()
			if n == 1 {
				s.out.OnePerSec = rate
			} else {
				s.out.ManyPerSec = rate
			}
		}
	}
	for i, s := range sides {
		if s.ratesOnly {
			continue
		}
		p50, p99, missed, err := xprocHandoff(ctx, t, name, s.name, pools[i][0].c, cfg.Handoffs)
		if err != nil {
			return nil, fmt.Errorf("handoff to another process (%s): %v", s.name, err)
		}
		s.out.HandoffP50MS, s.out.HandoffP99MS, s.out.HandoffMissed = p50, p99, missed
	}
	if cfg.Idle > 0 {
		for i, s := range sides {
			if s.ratesOnly {
				continue
			}
			qps, err := idleWaiter(ctx, t, s.open, pools[i][0].c, cfg.Idle, t.Pooler)
			if err != nil {
				return nil, fmt.Errorf("idle waiter (%s): %v", s.name, err)
			}
			s.out.IdleWaiterQPS = qps
		}
	}
	// The hot key's halves alternate too. A first half's last turns run to
	// their end (drain): a raw waiter cut off loses its pinned session.
	hot := make([]hotRun, len(sides))
	for round := range 2 {
		for i, s := range sides {
			if err := hot[i].run(ctx, contenders(pools[i]), "multi-hot-"+s.name, cfg.Duration/2, round == 0 || t.Pooler); err != nil {
				return nil, err
			}
		}
	}
	for i, s := range sides {
		hot[i].report(s.out)
	}
	if plan.fair != nil {
		// The fair clients run alone: a Locker that waited listens for a
		// while after (2 s), and PostgreSQL signals every listening
		// session at each release that calls a waiter.
		for i := range pools {
			closePools(pools[i])
			pools[i] = nil
		}
		fair, err := openPools(ctx, t, cfg.Clients, plan.fair)
		defer closePools(fair)
		if err != nil {
			return nil, err
		}
		// The other sides' pools are warm from the earlier cases; these
		// are new. One untimed round on a key of its own opens each
		// client's connections and, as they wait, their listening
		// sessions (kept 2 s after a wait), so that dials are not counted
		// against the fair order.
		if err := warmClients(ctx, contenders(fair)); err != nil {
			return nil, err
		}
		res.Fair = &MultiSide{}
		var h hotRun
		if err := h.run(ctx, contenders(fair), "multi-hot-fair", cfg.Duration, false); err != nil {
			return nil, err
		}
		h.report(res.Fair)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	res.OneRatio = ratio(res.Lib.OnePerSec, res.Raw.OnePerSec)
	res.ManyRatio = ratio(res.Lib.ManyPerSec, res.Raw.ManyPerSec)
	res.HotRatio = ratio(res.Lib.HotPerSec, res.Raw.HotPerSec)
	if res.Fair != nil {
		res.FairRatio = ratio(res.Fair.HotPerSec, res.Raw.HotPerSec)
	}
	if b := res.WithoutToken; b != nil {
		res.WithoutTokenOneRatio = ratio(b.OnePerSec, res.Raw.OnePerSec)
		res.WithoutTokenManyRatio = ratio(b.ManyPerSec, res.Raw.ManyPerSec)
		res.WithoutTokenHotRatio = ratio(b.HotPerSec, res.Raw.HotPerSec)
	}
	return res, nil
}

// warmClients has every client of cs take and free one key at once, untimed.
func warmClients(ctx context.Context, cs []contender) error {
	k := benchKey("warm-up")
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if errs[i] = c.acquire(ctx, k); errs[i] == nil {
				errs[i] = c.release(ctx)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hotRun adds up runs of clients taking turns on one key: each client's
// turns, the time, and every wait.
type hotRun struct {
	turns []int
	el    time.Duration
	waits []time.Duration
}

// run runs cs on a key of its own for d (hotKey) and adds what it counted.
func (h *hotRun) run(ctx context.Context, cs []contender, name string, d time.Duration, drain bool) error {
	k := benchKey(name)
	waits := make([][]time.Duration, len(cs))
	turns, el, err := hotKey(ctx, len(cs), d, drain, func(ctx context.Context, c int) error {
		start := time.Now()
		if err := cs[c].acquire(ctx, k); err != nil {
			return err
		}
		waits[c] = append(waits[c], time.Since(start))
		return cs[c].release(ctx)
	})
	if err != nil {
		return err
	}
	if h.turns == nil {
		h.turns = make([]int, len(cs))
	}
	for i, n := range turns {
		h.turns[i] += n
	}
	h.el += el
	h.waits = append(h.waits, slices.Concat(waits...)...)
	return nil
}

// report writes the hot-key figures of everything run into out.
func (h *hotRun) report(out *MultiSide) {
	out.HotPerSec, out.HotServed, _ = hotStats(h.turns, h.el)
	out.HotWaitP50MS, out.HotWaitP99MS = percentiles(h.waits)
	total := sum(h.turns)
	for _, n := range h.turns {
		share := 0.0
		if total > 0 {
			share = float64(n) / float64(total)
		}
		out.HotShares = append(out.HotShares, share)
		out.HotBusiest = max(out.HotBusiest, share)
	}
}

// distinctKeys runs every client on a key of its own for d and returns
// the operations done by all.
func distinctKeys(ctx context.Context, cs []contender, d time.Duration) (int, time.Duration, error) {
	var total atomic.Int64
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cs {
		key := benchKey("multi-distinct")
		wg.Go(func() {
			n, _, err := uncontended(ctx, c, key, d)
			total.Add(int64(n))
			errs[i] = err
		})
	}
	wg.Wait()
	el := time.Since(start)
	return int(total.Load()), el, errors.Join(errs...)
}

// idleWaiter counts the statements a waiter on its own pool sends while
// holder keeps the key for window. The wait is cut off at the end, or,
// with drain, ended by the holder's release.
func idleWaiter(ctx context.Context, t Target, open func(context.Context, *sql.DB) (contender, error), holder contender, window time.Duration, drain bool) (float64, error) {
	var n atomic.Int64
	db, err := CountingDB(t, &n)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	w, err := open(ctx, db)
	if err != nil {
		return 0, err
	}
	defer w.close()
	key := benchKey("idle")
	if err := holder.acquire(ctx, key); err != nil {
		return 0, err
	}
	held := true
	defer func() {
		if held {
			holder.release(ctx)
		}
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.acquire(wctx, key) }()
	// Settle first: the waiter's opening statements are not its idle load.
	time.Sleep(200 * time.Millisecond)
	before, start := n.Load(), time.Now()
	time.Sleep(window)
	qps := float64(n.Load()-before) / time.Since(start).Seconds()
	if !drain {
		cancel()
		if err := <-done; err == nil {
			w.release(ctx)
			return 0, errors.New("the waiter took a held key")
		}
		return qps, nil
	}
	// The wait ends by the release, not cut off (see hotKey).
	select {
	case err := <-done:
		if err == nil {
			w.release(ctx)
			return 0, errors.New("the waiter took a held key")
		}
		return 0, err
	default:
	}
	held = false
	if err := holder.release(ctx); err != nil {
		return 0, err
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("the waiter did not take the freed key: %v", err)
	}
	return qps, w.release(ctx)
}

// xprocHandoff times release → a waiter in a child process returns, n
// times after warmUp rounds, on one key.
func xprocHandoff(ctx context.Context, t Target, strategy, sideName string, holder contender, n int) (p50, p99 float64, missed int, err error) {
	cmd, err := t.Child(ctx, "waiter", "--strategy", strategy, "--side", sideName)
	if err != nil {
		return 0, 0, 0, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		stdin.Close()
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("waiter process: %v: %s", werr, strings.TrimSpace(stderr.String()))
		}
	}()
	lines := bufio.NewScanner(stdout)
	expect := func(prefix string) (string, error) {
		if !lines.Scan() {
			return "", fmt.Errorf("waiter process ended (%v): %s", lines.Err(), strings.TrimSpace(stderr.String()))
		}
		l := lines.Text()
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("waiter process said %q, want %s", l, prefix)
		}
		return strings.TrimPrefix(l, prefix), nil
	}
	if _, err := expect("ready"); err != nil {
		return 0, 0, 0, err
	}
	key := benchKey("xproc-handoff")
	var lat []time.Duration
	for round := range warmUp + n {
		if err := holder.acquire(ctx, key); err != nil {
			return 0, 0, 0, err
		}
		fmt.Fprintln(stdin, key)
		if _, err := expect("waiting"); err != nil {
			holder.release(ctx)
			return 0, 0, 0, err
		}
		time.Sleep(5 * time.Millisecond) // let the waiter block
		released := time.Now()
		if err := holder.release(ctx); err != nil {
			return 0, 0, 0, err
		}
		got, err := expect("")
		if err != nil {
			return 0, 0, 0, err
		}
		if got == "missed" {
			if round >= warmUp {
				missed++
			}
		} else {
			ns, err := strconv.ParseInt(strings.TrimPrefix(got, "got "), 10, 64)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("waiter process said %q", got)
			}
			if round >= warmUp {
				lat = append(lat, time.Unix(0, ns).Sub(released))
			}
		}
		if _, err := expect("done"); err != nil {
			return 0, 0, 0, err
		}
	}
	p50, p99 = percentiles(lat)
	return p50, p99, missed, nil
}

// ErrNoMulti is Waiter's answer for a strategy with no multi-client cases.
var ErrNoMulti = errors.New("no multi-client bench")

// Waiter is the child side of xprocHandoff, run by the command's hidden
// worker as Target.Child started it: it opens a client of strategy's side
// ("lib" or "raw") on db, says "ready", and for each key read from in,
// says "waiting", acquires, says "got <unix ns>" (or "missed" after
// handoffWait), releases and says "done".
func Waiter(ctx context.Context, db *sql.DB, t Target, strategy, sideName string, in io.Reader, w io.Writer) error {
	plan, err := multiPlanFor(ctx, db, t, strategy)
	if err != nil {
		return err
	}
	if plan == nil {
		return fmt.Errorf("%w for %q", ErrNoMulti, strategy)
	}
	open := plan.lib
	if sideName == "raw" {
		open = plan.raw
	}
	c, err := open(ctx, db)
	if err != nil {
		return err
	}
	defer c.close()
	out := bufio.NewWriter(w)
	say := func(s string) {
		out.WriteString(s + "\n")
		out.Flush()
	}
	say("ready")
	keys := bufio.NewScanner(in) // the parent bench writes the keys
	for keys.Scan() {
		say("waiting")
		wctx, cancel := context.WithTimeout(ctx, handoffWait)
		err := c.acquire(wctx, keys.Text())
		at := time.Now()
		cancel()
		switch {
		case err == nil:
			say("got " + strconv.FormatInt(at.UnixNano(), 10))
			if err := c.release(ctx); err != nil {
				return err
			}
		case wctx.Err() != nil && ctx.Err() == nil:
			say("missed")
		default:
			return err
		}
		say("done")
	}
	return keys.Err()
}

func printMulti(w io.Writer, r *MultiResult) {
	fmt.Fprintf(w, "multi-client: one pool and one Locker per client\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tsqllock\traw SQL\tsqllock/raw\t")
	fmt.Fprintf(tw, "1 client\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Lib.OnePerSec, r.Raw.OnePerSec, r.OneRatio)
	fmt.Fprintf(tw, "%d clients, distinct keys\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Clients, r.Lib.ManyPerSec, r.Raw.ManyPerSec, r.ManyRatio)
	fmt.Fprintf(tw, "hot key, %d clients\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Clients, r.Lib.HotPerSec, r.Raw.HotPerSec, r.HotRatio)
	fmt.Fprintf(tw, "hot key, clients served\t%d/%d\t%d/%d\t\t\n", r.Lib.HotServed, r.Clients, r.Raw.HotServed, r.Clients)
	fmt.Fprintf(tw, "hot key, busiest share\t%.0f%%\t%.0f%%\t\t\n", 100*r.Lib.HotBusiest, 100*r.Raw.HotBusiest)
	fmt.Fprintf(tw, "hot key, shares\t%s\t%s\t\t\n", shares(r.Lib.HotShares), shares(r.Raw.HotShares))
	fmt.Fprintf(tw, "hot key, wait p50\t%.2fms\t%.2fms\t\t\n", r.Lib.HotWaitP50MS, r.Raw.HotWaitP50MS)
	fmt.Fprintf(tw, "hot key, wait p99\t%.2fms\t%.2fms\t%.2f\t\n", r.Lib.HotWaitP99MS, r.Raw.HotWaitP99MS, ratio0(r.Lib.HotWaitP99MS, r.Raw.HotWaitP99MS))
	fmt.Fprintf(tw, "handoff p50, other process\t%.2fms\t%.2fms\t\t\n", r.Lib.HandoffP50MS, r.Raw.HandoffP50MS)
	fmt.Fprintf(tw, "handoff p99, other process\t%.2fms\t%.2fms\t\t\n", r.Lib.HandoffP99MS, r.Raw.HandoffP99MS)
	if r.Lib.HandoffMissed+r.Raw.HandoffMissed > 0 {
		fmt.Fprintf(tw, "handoff missed wake-ups (>%v)\t%d\t%d\t\t\n", handoffWait, r.Lib.HandoffMissed, r.Raw.HandoffMissed)
	}
	if r.IdleWindow > 0 {
		fmt.Fprintf(tw, "idle waiter, statements/s\t%.1f\t%.1f\t\t\n", r.Lib.IdleWaiterQPS, r.Raw.IdleWaiterQPS)
	}
	if f := r.Fair; f != nil {
		fmt.Fprintf(tw, "fair order: hot key, %d clients\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Clients, f.HotPerSec, r.Raw.HotPerSec, r.FairRatio)
		fmt.Fprintf(tw, "fair order: clients served\t%d/%d\t%d/%d\t\t\n", f.HotServed, r.Clients, r.Raw.HotServed, r.Clients)
		fmt.Fprintf(tw, "fair order: shares\t%s\t%s\t\t\n", shares(f.HotShares), shares(r.Raw.HotShares))
	}
	if b := r.WithoutToken; b != nil {
		fmt.Fprintf(tw, "without token: 1 client\t%.0f/s\t%.0f/s\t%.2f\t\n", b.OnePerSec, r.Raw.OnePerSec, r.WithoutTokenOneRatio)
		fmt.Fprintf(tw, "without token: %d clients\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Clients, b.ManyPerSec, r.Raw.ManyPerSec, r.WithoutTokenManyRatio)
		fmt.Fprintf(tw, "without token: hot key\t%.0f/s\t%.0f/s\t%.2f\t\n", b.HotPerSec, r.Raw.HotPerSec, r.WithoutTokenHotRatio)
	}
	tw.Flush()
	if r.FairSkipped != "" {
		fmt.Fprintf(w, "fair order: skipped, %s\n", r.FairSkipped)
	}
	fmt.Fprintf(w, "(raw SQL: %s)\n", r.RawSQL)
}

// ratio0 is a / b, or 0 when b is.
func ratio0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func shares(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(int(100*x + 0.5))
	}
	return strings.Join(parts, " ") + " %"
}
