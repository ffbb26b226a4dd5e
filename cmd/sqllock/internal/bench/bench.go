// Package bench is the harness of `sqllock bench`: it measures each
// strategy beside the raw SQL of the same operation (uncontended rate,
// handoff latency, a hot key), and the multi-client cases where every
// client has its own pool and Locker and the handoff's waiter runs in
// another process. The command parses the flags and the DSN and calls Run;
// its hidden worker calls Waiter.
package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
)

// Side is one measurement of the library or of the raw SQL.
type Side struct {
	UncontendedPerSec float64 `json:"uncontended_per_sec"`
	// The handoff figures are absent where nobody waits (optimistic).
	HandoffP50MS *float64 `json:"handoff_p50_ms,omitempty"`
	HandoffP99MS *float64 `json:"handoff_p99_ms,omitempty"`
	// HandoffMissed counts waiters still blocked 5s after the release:
	// lost wake-ups, left out of the percentiles.
	HandoffMissed  *int    `json:"handoff_missed,omitempty"`
	HotKeyPerSec   float64 `json:"hot_key_per_sec"`
	HotKeyServed   int     `json:"hot_key_clients_served"`
	HotKeyMinTurns int     `json:"hot_key_min_turns"`
	// HotKeyRetries is the mean number of attempts repeated per operation
	// on the hot key after a lost race; absent where clients wait their
	// turn instead.
	HotKeyRetries *float64 `json:"hot_key_retries_per_op,omitempty"`
}

// Result is one strategy's measures.
type Result struct {
	Strategy  string `json:"strategy"`
	Operation string `json:"operation"`
	RawSQL    string `json:"raw_sql"`
	// NoHandoff says why the strategy has no handoff figures.
	NoHandoff string `json:"no_handoff,omitempty"`
	Lib       Side   `json:"sqllock"`
	Raw       Side   `json:"raw"`
	// UncontendedRatio and HotKeyRatio are sqllock / raw: 1 is parity.
	UncontendedRatio float64 `json:"uncontended_ratio"`
	HotKeyRatio      float64 `json:"hot_key_ratio"`
	// Multi is the multi-client cases, where the strategy has them.
	Multi *MultiResult `json:"multi_client,omitempty"`
}

// Report is a run's measures, as --json prints them.
type Report struct {
	Database   string `json:"database"`
	Dialect    string `json:"dialect"`
	DurationMS int64  `json:"duration_ms"`
	Clients    int    `json:"clients"`
	Handoffs   int    `json:"handoffs"`
	// Pooler: through a transaction pooler (sqllock_pooler=transaction),
	// both sides in the forms that work there.
	Pooler  bool     `json:"transaction_pooler,omitempty"`
	Results []Result `json:"results"`
	Skipped []Skip   `json:"skipped"`
}

// Target is the database a bench runs on, as the command parsed it.
type Target struct {
	Display string          // for people: no password
	Driver  string          // database/sql driver name
	DSN     string          // in the driver's form
	Dialect sqllock.Dialect // the locks' dialect
	// Pooler: behind a transaction pooler, where both sides run in the
	// forms that work there.
	Pooler bool
	// Child returns this command re-executed as its hidden worker with
	// args, on the same database: the waiter in another process.
	Child func(ctx context.Context, args ...string) (*exec.Cmd, error)
}

// Config is what a bench measures, from the command's flags.
type Config struct {
	Duration time.Duration // each rate measurement
	Clients  int           // contending for the hot key
	Handoffs int           // timed for the latency percentiles
	Multi    bool          // also the multi-client cases
	Idle     time.Duration // an idle waiter's window; 0 skips
}

// Skip is a strategy left out of a run, with the reason.
type Skip struct {
	Strategy string `json:"strategy"`
	Reason   string `json:"reason"`
}

// Has says whether strategy has a bench.
func Has(strategy string) bool {
	_, ok := plans[strategy]
	return ok
}

// plans sets each strategy beside its raw SQL. With pooler, both sides in
// their forms for a transaction-pooling proxy.
var plans = map[string]func(ctx context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error){
	"tablelock":  benchTablelock,
	"rowlock":    benchRowlock,
	"optimistic": benchOptimistic,
	"advisory":   benchAdvisory,
}

// Run measures strategies (each of which Has a bench) on db, one after
// the other, and writes the tables to w, or with asJSON the report;
// skipped are listed at the end.
func Run(ctx context.Context, db *sql.DB, t Target, strategies []string, skipped []Skip, cfg Config, w io.Writer, asJSON bool) error {
	rep := Report{Database: t.Display, Dialect: t.Dialect.String(), DurationMS: cfg.Duration.Milliseconds(),
		Clients: cfg.Clients, Handoffs: cfg.Handoffs, Pooler: t.Pooler, Results: []Result{}, Skipped: skipped}
	for _, name := range strategies {
		res, err := benchStrategy(ctx, db, t, name, cfg)
		if err != nil {
			return fmt.Errorf("bench %s: %v", name, err)
		}
		if cfg.Multi {
			if res.Multi, err = benchMulti(ctx, t, db, name, cfg); err != nil {
				return fmt.Errorf("bench %s, multi-client: %v", name, err)
			}
		}
		rep.Results = append(rep.Results, res)
		if !asJSON {
			printBench(w, res, cfg)
			if res.Multi != nil {
				printMulti(w, res.Multi)
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printBenchSummary(w, rep)
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "%s: skipped, %s\n", s.Strategy, s.Reason)
	}
	return nil
}

func printBench(w io.Writer, r Result, cfg Config) {
	fmt.Fprintf(w, "\n%s\n", r.Strategy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tsqllock\traw SQL\tsqllock/raw\t")
	fmt.Fprintf(tw, "uncontended %s\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Operation, r.Lib.UncontendedPerSec, r.Raw.UncontendedPerSec, r.UncontendedRatio)
	if r.NoHandoff == "" {
		fmt.Fprintf(tw, "handoff p50\t%s\t%s\t\t\n", ms(r.Lib.HandoffP50MS), ms(r.Raw.HandoffP50MS))
		fmt.Fprintf(tw, "handoff p99\t%s\t%s\t\t\n", ms(r.Lib.HandoffP99MS), ms(r.Raw.HandoffP99MS))
		if lib, raw := deref(r.Lib.HandoffMissed), deref(r.Raw.HandoffMissed); lib+raw > 0 {
			fmt.Fprintf(tw, "handoff missed wake-ups (>%v)\t%d\t%d\t\t\n", handoffWait, lib, raw)
		}
	}
	fmt.Fprintf(tw, "hot key, %d clients\t%.0f/s\t%.0f/s\t%.2f\t\n", cfg.Clients, r.Lib.HotKeyPerSec, r.Raw.HotKeyPerSec, r.HotKeyRatio)
	fmt.Fprintf(tw, "hot key, clients served\t%d/%d\t%d/%d\t\t\n", r.Lib.HotKeyServed, cfg.Clients, r.Raw.HotKeyServed, cfg.Clients)
	fmt.Fprintf(tw, "hot key, fewest turns\t%d\t%d\t\t\n", r.Lib.HotKeyMinTurns, r.Raw.HotKeyMinTurns)
	if r.Lib.HotKeyRetries != nil {
		fmt.Fprintf(tw, "hot key, retries per op\t%.2f\t%.2f\t\t\n", deref(r.Lib.HotKeyRetries), deref(r.Raw.HotKeyRetries))
	}
	tw.Flush()
	if r.NoHandoff != "" {
		fmt.Fprintf(w, "no handoff: %s\n", r.NoHandoff)
	}
	fmt.Fprintf(w, "(raw SQL: %s)\n", r.RawSQL)
}

// printBenchSummary puts the ratios of every strategy side by side.
func printBenchSummary(w io.Writer, rep Report) {
	if len(rep.Results) < 2 {
		return
	}
	fmt.Fprintf(w, "\nsummary\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy  \tuncontended sqllock/raw\thot key sqllock/raw\thandoff p50 sqllock, raw\t")
	for _, r := range rep.Results {
		handoff := "n/a"
		if r.NoHandoff == "" {
			handoff = ms(r.Lib.HandoffP50MS) + ", " + ms(r.Raw.HandoffP50MS)
		}
		fmt.Fprintf(tw, "%-10s\t%.2f\t%.2f\t%s\t\n", r.Strategy, r.UncontendedRatio, r.HotKeyRatio, handoff)
	}
	tw.Flush()
}

func ms(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2fms", *v)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func benchKey(what string) string {
	return fmt.Sprintf("sqllock-bench/%s/%x", what, rand.Uint64())
}

// benchStrategy measures strategy name and its raw SQL, one after the other, in this run.
func benchStrategy(ctx context.Context, db *sql.DB, t Target, name string, cfg Config) (res Result, err error) {
	plan, err := plans[name](ctx, db, t.Dialect, t.Pooler)
	if err != nil {
		return res, err
	}
	if plan.close != nil {
		defer plan.close()
	}
	res = Result{Strategy: name, Operation: plan.op, RawSQL: plan.rawSQL, NoHandoff: plan.noHandoff}
	n := max(cfg.Clients, 2)
	lib, err := openClients(ctx, plan.lib, n)
	defer closeClients(lib)
	if err != nil {
		return res, err
	}
	raw, err := openClients(ctx, plan.raw, n)
	defer closeClients(raw)
	if err != nil {
		return res, err
	}
	key := func(sd side, what string) (string, error) {
		k := benchKey(what)
		if sd.prepare == nil {
			return k, nil
		}
		return k, sd.prepare(ctx, k)
	}

	// The uncontended rates alternate lib and raw so that a slower patch of
	// the machine does not land on one side only.
	libKey, err := key(plan.lib, "uncontended")
	if err != nil {
		return res, err
	}
	rawKey, err := key(plan.raw, "uncontended-raw")
	if err != nil {
		return res, err
	}
	half := cfg.Duration / 2
	var libN, rawN int
	var libT, rawT time.Duration
	for range 2 {
		n, el, err := uncontended(ctx, lib[0], libKey, half)
		if err != nil {
			return res, err
		}
		libN, libT = libN+n, libT+el
		n, el, err = uncontended(ctx, raw[0], rawKey, half)
		if err != nil {
			return res, err
		}
		rawN, rawT = rawN+n, rawT+el
	}
	res.Lib.UncontendedPerSec = float64(libN) / libT.Seconds()
	res.Raw.UncontendedPerSec = float64(rawN) / rawT.Seconds()
	res.UncontendedRatio = res.Lib.UncontendedPerSec / res.Raw.UncontendedPerSec

	if plan.noHandoff == "" {
		for _, m := range []struct {
			sd      side
			clients []contender
			out     *Side
			what    string
		}{{plan.lib, lib, &res.Lib, "handoff"}, {plan.raw, raw, &res.Raw, "handoff-raw"}} {
			k, err := key(m.sd, m.what)
			if err != nil {
				return res, err
			}
			p50, p99, missed, err := handoff(ctx, m.clients[0], m.clients[1], k, cfg.Handoffs)
			if err != nil {
				return res, err
			}
			m.out.HandoffP50MS, m.out.HandoffP99MS, m.out.HandoffMissed = &p50, &p99, &missed
		}
	}

	for _, m := range []struct {
		sd      side
		clients []contender
		out     *Side
		what    string
	}{{plan.lib, lib, &res.Lib, "hot"}, {plan.raw, raw, &res.Raw, "hot-raw"}} {
		k, err := key(m.sd, m.what)
		if err != nil {
			return res, err
		}
		var before int64
		if m.sd.retries != nil {
			before = m.sd.retries.Load()
		}
		turns, el, err := hotKey(ctx, cfg.Clients, cfg.Duration, t.Pooler, func(ctx context.Context, i int) error {
			if err := m.clients[i].acquire(ctx, k); err != nil {
				return err
			}
			return m.clients[i].release(ctx)
		})
		if err != nil {
			return res, err
		}
		m.out.HotKeyPerSec, m.out.HotKeyServed, m.out.HotKeyMinTurns = hotStats(turns, el)
		if total := sum(turns); m.sd.retries != nil && total > 0 {
			r := float64(m.sd.retries.Load()-before) / float64(total)
			m.out.HotKeyRetries = &r
		}
	}
	if res.Raw.HotKeyPerSec > 0 {
		res.HotKeyRatio = res.Lib.HotKeyPerSec / res.Raw.HotKeyPerSec
	}
	return res, nil
}

// openClients opens n clients of sd; on an error it returns those it
// opened, for closeClients.
func openClients(ctx context.Context, sd side, n int) ([]contender, error) {
	var cs []contender
	for range n {
		c, err := sd.open(ctx)
		if err != nil {
			return cs, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeClients(cs []contender) {
	for _, c := range cs {
		c.close()
	}
}

func uncontended(ctx context.Context, c contender, key string, d time.Duration) (int, time.Duration, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if err := c.acquire(ctx, key); err != nil {
			return 0, 0, err
		}
		if err := c.release(ctx); err != nil {
			return 0, 0, err
		}
		n++
	}
	return n, time.Since(start), nil
}

// handoffWait bounds how long a waiter may stay blocked after a release
// before the round counts as a missed wake-up, so one cannot stall the
// bench for a whole lease.
const handoffWait = 5 * time.Second

// handoff times release → a blocked waiter returns, n times after
// warmUp rounds, and returns p50 and p99 in milliseconds over
// the rounds whose waiter was woken, and how many were not woken within
// handoffWait.
func handoff(ctx context.Context, holder, waiter contender, key string, n int) (p50, p99 float64, missed int, err error) {
	lat := make([]time.Duration, 0, n)
	for round := range warmUp + n {
		if err := holder.acquire(ctx, key); err != nil {
			return 0, 0, 0, err
		}
		type got struct {
			at  time.Time
			err error
		}
		ch := make(chan got, 1)
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			err := waiter.acquire(wctx, key)
			ch <- got{time.Now(), err}
		}()
		time.Sleep(2 * time.Millisecond) // let the waiter block
		released := time.Now()
		if err := holder.release(ctx); err != nil {
			cancel()
			if g := <-ch; g.err == nil {
				waiter.release(ctx)
			}
			return 0, 0, 0, err
		}
		timer := time.AfterFunc(handoffWait, cancel)
		g := <-ch
		timer.Stop()
		cancel()
		switch {
		case g.err != nil && errors.Is(g.err, context.Canceled) && ctx.Err() == nil:
			if round >= warmUp {
				missed++
			}
			continue
		case g.err != nil:
			return 0, 0, 0, g.err
		}
		if round >= warmUp {
			lat = append(lat, g.at.Sub(released))
		}
		if err := waiter.release(ctx); err != nil {
			return 0, 0, 0, err
		}
	}
	p50, p99 = percentiles(lat)
	return p50, p99, missed, nil
}

// warmUp is the handoff rounds run before the timed ones, on both sides:
// a Locker's first waits open the sessions it waits on (tablelock's
// listening session, advisory's wait session: 15-50 ms each), once in
// its life, which is not a handoff's cost.
const warmUp = 2

// percentiles returns p50 and p99 of lat in milliseconds; 0 for none.
func percentiles(lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	toMS := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return toMS(lat[len(lat)/2]), toMS(lat[(len(lat)*99)/100])
}

// hotKey runs clients loops of op on one key for d and counts each
// client's turns. An op still waiting at the end is cut off, unless drain:
// then each client's last op runs to its end (one turn each at most),
// and so does the run. Behind a transaction pooler that is the way: a
// statement cut off there makes pgx send a cancel request as it closes
// the connection, and PgBouncer 1.18 can die of the race between the two
// (pgbouncer/pgbouncer#801).
func hotKey(ctx context.Context, clients int, d time.Duration, drain bool, op func(ctx context.Context, client int) error) ([]int, time.Duration, error) {
	turns := make([]int, clients)
	errs := make([]error, clients)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				wctx, cancel := context.WithDeadline(ctx, stop)
				if drain {
					wctx, cancel = context.WithCancel(ctx)
				}
				err := op(wctx, i)
				cancel()
				if err != nil {
					if wctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				turns[i]++
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return turns, el, nil
}

func hotStats(turns []int, el time.Duration) (perSec float64, served, minTurns int) {
	minTurns = turns[0]
	for _, n := range turns {
		if n > 0 {
			served++
		}
		minTurns = min(minTurns, n)
	}
	return float64(sum(turns)) / el.Seconds(), served, minTurns
}

func sum(xs []int) int {
	total := 0
	for _, x := range xs {
		total += x
	}
	return total
}
