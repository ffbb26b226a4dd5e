package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
)

// benchSide is one measurement of the library or of the raw SQL.
type benchSide struct {
	UncontendedPerSec float64 `json:"uncontended_per_sec"`
	HandoffP50MS      float64 `json:"handoff_p50_ms"`
	HandoffP99MS      float64 `json:"handoff_p99_ms"`
	// HandoffMissed counts waiters still blocked 5s after the release:
	// lost wake-ups, left out of the percentiles.
	HandoffMissed  int     `json:"handoff_missed"`
	HotKeyPerSec   float64 `json:"hot_key_per_sec"`
	HotKeyServed   int     `json:"hot_key_clients_served"`
	HotKeyMinTurns int     `json:"hot_key_min_turns"`
}

type benchResult struct {
	Strategy string    `json:"strategy"`
	Lib      benchSide `json:"sqllock"`
	Raw      benchSide `json:"raw"`
	// UncontendedRatio and HotKeyRatio are sqllock / raw: 1 is parity.
	UncontendedRatio float64 `json:"uncontended_ratio"`
	HotKeyRatio      float64 `json:"hot_key_ratio"`
}

type benchReport struct {
	Database   string        `json:"database"`
	Dialect    string        `json:"dialect"`
	DurationMS int64         `json:"duration_ms"`
	Clients    int           `json:"clients"`
	Handoffs   int           `json:"handoffs"`
	Results    []benchResult `json:"results"`
	Skipped    []skip        `json:"skipped"`
}

type benchConfig struct {
	duration time.Duration
	clients  int
	handoffs int
}

func cmdBench(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("bench", e, &df)
	var cfg benchConfig
	fs.DurationVar(&cfg.duration, "duration", time.Second, "length of each rate measurement")
	fs.IntVar(&cfg.clients, "clients", 8, "clients contending for the hot key")
	fs.IntVar(&cfg.handoffs, "handoffs", 50, "handoffs timed for the latency percentiles")
	strat := fs.String("strategy", "all", "comma-separated strategies, or all")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fail(exitUsage, "bench takes no arguments, got %q", pos[0])
	case cfg.duration <= 0 || cfg.clients < 1 || cfg.handoffs < 1:
		return fail(exitUsage, "bench: --duration must be positive, --clients and --handoffs at least 1")
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		run, skipped, err := pick(*strat, t.dialect, func(s strategy) bool { return s.raw != nil })
		if err != nil {
			return err
		}
		rep := benchReport{Database: t.display, Dialect: t.dialect.String(), DurationMS: cfg.duration.Milliseconds(),
			Clients: cfg.clients, Handoffs: cfg.handoffs, Results: []benchResult{}, Skipped: skipped}
		if !*asJSON {
			fmt.Fprintf(e.stdout, "bench on %s: %v per rate, %d hot-key clients, %d handoffs\n", t.display, cfg.duration, cfg.clients, cfg.handoffs)
		}
		for _, s := range run {
			res, err := benchStrategy(ctx, db, t.dialect, s, cfg)
			if err != nil {
				return fmt.Errorf("bench %s: %v", s.name, err)
			}
			rep.Results = append(rep.Results, res)
			if !*asJSON {
				printBench(e.stdout, res, cfg)
			}
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		for _, s := range rep.Skipped {
			fmt.Fprintf(e.stdout, "%s: skipped, %s\n", s.Strategy, s.Reason)
		}
		return nil
	})
}

func printBench(w io.Writer, r benchResult, cfg benchConfig) {
	fmt.Fprintf(w, "\n%s\n", r.Strategy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tsqllock\traw SQL\tsqllock/raw\t")
	fmt.Fprintf(tw, "uncontended acquire+release\t%.0f/s\t%.0f/s\t%.2f\t\n", r.Lib.UncontendedPerSec, r.Raw.UncontendedPerSec, r.UncontendedRatio)
	fmt.Fprintf(tw, "handoff p50\t%.2fms\t%.2fms\t\t\n", r.Lib.HandoffP50MS, r.Raw.HandoffP50MS)
	fmt.Fprintf(tw, "handoff p99\t%.2fms\t%.2fms\t\t\n", r.Lib.HandoffP99MS, r.Raw.HandoffP99MS)
	if r.Lib.HandoffMissed+r.Raw.HandoffMissed > 0 {
		fmt.Fprintf(tw, "handoff missed wake-ups (>%v)\t%d\t%d\t\t\n", handoffWait, r.Lib.HandoffMissed, r.Raw.HandoffMissed)
	}
	fmt.Fprintf(tw, "hot key, %d clients\t%.0f/s\t%.0f/s\t%.2f\t\n", cfg.clients, r.Lib.HotKeyPerSec, r.Raw.HotKeyPerSec, r.HotKeyRatio)
	fmt.Fprintf(tw, "hot key, clients served\t%d/%d\t%d/%d\t\t\n", r.Lib.HotKeyServed, cfg.clients, r.Raw.HotKeyServed, cfg.clients)
	fmt.Fprintf(tw, "hot key, fewest turns\t%d\t%d\t\t\n", r.Lib.HotKeyMinTurns, r.Raw.HotKeyMinTurns)
	tw.Flush()
	fmt.Fprintln(w, "(raw SQL: the same statements by hand, prepared once; its waiters retry at once, without sleeping)")
}

func benchKey(what string) string {
	return fmt.Sprintf("sqllock-bench/%s/%x", what, rand.Uint64())
}

// benchStrategy measures s and its raw SQL, one after the other, in this run.
func benchStrategy(ctx context.Context, db *sql.DB, d sqllock.Dialect, s strategy, cfg benchConfig) (benchResult, error) {
	res := benchResult{Strategy: s.name}
	lockers := make([]sqllock.Locker, max(cfg.clients, 2))
	for i := range lockers {
		l, closeFn, err := s.newLocker(db, d)
		if err != nil {
			return res, err
		}
		defer closeFn()
		lockers[i] = l
	}
	raw, err := s.raw(db, d)
	if err != nil {
		return res, err
	}
	defer raw.close()

	// The uncontended rates alternate lib and raw so that a slower patch of
	// the machine does not land on one side only.
	half := cfg.duration / 2
	var libN, rawN int
	var libT, rawT time.Duration
	for range 2 {
		n, el, err := uncontendedLib(ctx, lockers[0], half)
		if err != nil {
			return res, err
		}
		libN, libT = libN+n, libT+el
		n, el, err = uncontendedRaw(ctx, raw, half)
		if err != nil {
			return res, err
		}
		rawN, rawT = rawN+n, rawT+el
	}
	res.Lib.UncontendedPerSec = float64(libN) / libT.Seconds()
	res.Raw.UncontendedPerSec = float64(rawN) / rawT.Seconds()

	if res.Lib.HandoffP50MS, res.Lib.HandoffP99MS, res.Lib.HandoffMissed, err = handoffLib(ctx, lockers[0], lockers[1], cfg.handoffs); err != nil {
		return res, err
	}
	if res.Raw.HandoffP50MS, res.Raw.HandoffP99MS, res.Raw.HandoffMissed, err = handoffRaw(ctx, raw, cfg.handoffs); err != nil {
		return res, err
	}

	key := benchKey("hot")
	turns, el, err := hotKey(ctx, cfg.clients, cfg.duration, func(ctx context.Context, i int) error {
		lease, err := lockers[i].Acquire(ctx, key)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	})
	if err != nil {
		return res, err
	}
	res.Lib.HotKeyPerSec, res.Lib.HotKeyServed, res.Lib.HotKeyMinTurns = hotStats(turns, el)
	key = benchKey("hot-raw")
	turns, el, err = hotKey(ctx, cfg.clients, cfg.duration, func(ctx context.Context, i int) error {
		owner := sqllock.NewOwnerID()
		token, err := spin(ctx, raw, key, owner)
		if err != nil {
			return err
		}
		return raw.release(ctx, key, owner, token)
	})
	if err != nil {
		return res, err
	}
	res.Raw.HotKeyPerSec, res.Raw.HotKeyServed, res.Raw.HotKeyMinTurns = hotStats(turns, el)

	res.UncontendedRatio = res.Lib.UncontendedPerSec / res.Raw.UncontendedPerSec
	if res.Raw.HotKeyPerSec > 0 {
		res.HotKeyRatio = res.Lib.HotKeyPerSec / res.Raw.HotKeyPerSec
	}
	return res, nil
}

func uncontendedLib(ctx context.Context, l sqllock.Locker, d time.Duration) (int, time.Duration, error) {
	key := benchKey("uncontended")
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			return 0, 0, err
		}
		if err := lease.Release(ctx); err != nil {
			return 0, 0, err
		}
		n++
	}
	return n, time.Since(start), nil
}

func uncontendedRaw(ctx context.Context, r rawLock, d time.Duration) (int, time.Duration, error) {
	key, owner := benchKey("uncontended-raw"), sqllock.NewOwnerID()
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		token, won, err := r.try(ctx, key, owner)
		if err != nil {
			return 0, 0, err
		}
		if !won {
			return 0, 0, fmt.Errorf("raw acquire of a free key %q refused", key)
		}
		if err := r.release(ctx, key, owner, token); err != nil {
			return 0, 0, err
		}
		n++
	}
	return n, time.Since(start), nil
}

// spin retries the raw acquire at once until it wins: the fastest a
// polling waiter can be, at the cost of a busy loop.
func spin(ctx context.Context, r rawLock, key, owner string) (int64, error) {
	for {
		token, won, err := r.try(ctx, key, owner)
		if err != nil || won {
			return token, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// handoffWait bounds how long a waiter may stay blocked after a release
// before the round counts as a missed wake-up, so one cannot stall the
// bench for a whole lease.
const handoffWait = 5 * time.Second

// handoff times release → a blocked waiter returns, n times, and returns
// p50 and p99 in milliseconds over the rounds whose waiter was woken, and
// how many were not woken within handoffWait.
func handoff(ctx context.Context, n int, hold, wait func(ctx context.Context) (release func() error, err error)) (p50, p99 float64, missed int, err error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		release, err := hold(ctx)
		if err != nil {
			return 0, 0, 0, err
		}
		type got struct {
			at      time.Time
			release func() error
			err     error
		}
		ch := make(chan got, 1)
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			rel, err := wait(wctx)
			ch <- got{time.Now(), rel, err}
		}()
		time.Sleep(2 * time.Millisecond) // let the waiter block
		released := time.Now()
		if err := release(); err != nil {
			cancel()
			return 0, 0, 0, err
		}
		timer := time.AfterFunc(handoffWait, cancel)
		g := <-ch
		timer.Stop()
		cancel()
		switch {
		case g.err != nil && errors.Is(g.err, context.Canceled) && ctx.Err() == nil:
			missed++
			continue
		case g.err != nil:
			return 0, 0, 0, g.err
		}
		lat = append(lat, g.at.Sub(released))
		if err := g.release(); err != nil {
			return 0, 0, 0, err
		}
	}
	if len(lat) == 0 {
		return 0, 0, missed, nil
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(lat[len(lat)/2]), ms(lat[(len(lat)*99)/100]), missed, nil
}

func handoffLib(ctx context.Context, a, w sqllock.Locker, n int) (float64, float64, int, error) {
	key := benchKey("handoff")
	take := func(l sqllock.Locker) func(context.Context) (func() error, error) {
		return func(ctx context.Context) (func() error, error) {
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				return nil, err
			}
			return func() error { return lease.Release(ctx) }, nil
		}
	}
	return handoff(ctx, n, take(a), take(w))
}

func handoffRaw(ctx context.Context, r rawLock, n int) (float64, float64, int, error) {
	key := benchKey("handoff-raw")
	take := func(ctx context.Context) (func() error, error) {
		owner := sqllock.NewOwnerID()
		token, err := spin(ctx, r, key, owner)
		if err != nil {
			return nil, err
		}
		return func() error { return r.release(context.WithoutCancel(ctx), key, owner, token) }, nil
	}
	return handoff(ctx, n, take, take)
}

// hotKey runs clients loops of op on one key for d and counts each
// client's turns.
func hotKey(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client int) error) ([]int, time.Duration, error) {
	turns := make([]int, clients)
	errs := make([]error, clients)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				wctx, cancel := context.WithDeadline(ctx, stop)
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
	total := 0
	minTurns = turns[0]
	for _, n := range turns {
		total += n
		if n > 0 {
			served++
		}
		minTurns = min(minTurns, n)
	}
	return float64(total) / el.Seconds(), served, minTurns
}
