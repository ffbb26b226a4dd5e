package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/shop"
)

// stockResult is one strategy's line of the stock demo.
type stockResult struct {
	Strategy  string  `json:"strategy"`
	Sold      int     `json:"sold"`
	Left      int     `json:"left"`
	Oversold  int     `json:"oversold"`
	Retries   int     `json:"retries"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

type stockReport struct {
	Database string        `json:"database"`
	Dialect  string        `json:"dialect"`
	Units    int           `json:"units"`
	Workers  int           `json:"workers"`
	Procs    int           `json:"procs"`
	Results  []stockResult `json:"results"`
	Skipped  []skip        `json:"skipped"`
}

func cmdStock(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("demo stock", e, &df)
	workers := fs.Int("workers", 8, "buyers, spread over --procs processes")
	units := fs.Int("units", 500, "units in stock")
	procs := fs.Int("procs", 1, "processes to run the workers in (this binary re-executed)")
	strat := fs.String("strategy", "all", "comma-separated strategies, all, or none (no lock: see what they prevent)")
	work := fs.Duration("work", 0, "pause inside the critical section, between reading and writing the count")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fail(exitUsage, "demo stock takes no arguments, got %q", pos[0])
	case *workers < 1 || *units < 0 || *procs < 1:
		return fail(exitUsage, "demo stock: --workers and --procs must be at least 1, --units at least 0")
	case *procs > *workers:
		return fail(exitUsage, "demo stock: --procs %d exceeds --workers %d", *procs, *workers)
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		run, skipped, err := pick(*strat, t.dialect, func(s strategy) bool { return s.buy != nil })
		if err != nil {
			return err
		}
		if err := shop.CreateTable(ctx, db); err != nil {
			return fmt.Errorf("creating the demo table: %v", err)
		}
		rep := stockReport{Database: t.display, Dialect: t.dialect.String(), Units: *units, Workers: *workers, Procs: *procs, Results: []stockResult{}, Skipped: skipped}
		if !*asJSON {
			fmt.Fprintf(e.stdout, "%d workers in %d process(es) buy %d units through each strategy, on %s\n\n", *workers, *procs, *units, t.display)
		}
		var bad []string
		for _, s := range run {
			res, err := runStock(ctx, t, db, s, *units, *workers, *procs, *work, progressTo(e, *asJSON))
			if err != nil {
				return fmt.Errorf("demo stock, %s: %v", s.name, err)
			}
			rep.Results = append(rep.Results, res)
			if res.Oversold != 0 && s.name != "none" {
				bad = append(bad, fmt.Sprintf("%s oversold %d", s.name, res.Oversold))
			}
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			printStock(e.stdout, rep)
		}
		if len(bad) > 0 {
			return fail(exitFailure, "demo stock: a lock did not hold: %v", bad)
		}
		return nil
	})
}

func printStock(w io.Writer, rep stockReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy  \tsold\tleft\toversold\tretries\ttime\tbuys/s\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%-10s\t%d\t%d\t%d\t%d\t%.2fs\t%.0f\t\n", r.Strategy, r.Sold, r.Left, r.Oversold, r.Retries, r.Seconds, r.PerSecond)
	}
	tw.Flush()
	if rep.Procs == 1 && slices.ContainsFunc(rep.Results, func(r stockResult) bool { return r.Strategy == "optimistic" }) {
		// Otherwise its 0 retries reads as "optimistic never conflicts".
		fmt.Fprintln(w, "optimistic: Modify queues the writers of one process on a row, so only processes race; see its retries with --procs 2 or more")
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "%s: skipped, %s\n", s.Strategy, s.Reason)
	}
}

// progressTo returns where live progress goes: stderr when it is a terminal
// and the output is for people, else nowhere.
func progressTo(e env, asJSON bool) io.Writer {
	if asJSON {
		return nil
	}
	if f, ok := e.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return f
		}
	}
	return nil
}

// runStock runs one strategy's demo on a fresh item of the stock table.
func runStock(ctx context.Context, t target, db *sql.DB, s strategy, units, workers, procs int, work time.Duration, progress io.Writer) (stockResult, error) {
	item := fmt.Sprintf("%s-%x", s.name, rand.Uint64())
	st, err := newStock(db, t.dialect, item, work, t.pooler)
	if err != nil {
		return stockResult{}, err
	}
	defer st.close()
	if err := shop.InsertRow(ctx, db, t.dialect, item, units); err != nil {
		return stockResult{}, err
	}
	defer shop.DeleteRow(context.WithoutCancel(ctx), db, t.dialect, item)

	stopProgress := showProgress(ctx, progress, st, s.name, units)
	start := time.Now()
	var sold, retries int
	if procs == 1 {
		sold, retries, err = buyAll(ctx, db, t, s, item, workers, work)
	} else {
		sold, retries, err = buyInChildren(ctx, t, s, item, workers, procs, work)
	}
	elapsed := time.Since(start)
	stopProgress()
	if s.forget != nil {
		s.forget(ctx, db, t.dialect, st.key())
	}
	if err != nil {
		return stockResult{}, err
	}
	left, err := st.units(ctx)
	if err != nil {
		return stockResult{}, err
	}
	return stockResult{
		Strategy: s.name, Sold: sold, Left: left,
		// A sale the stock did not have: more sold than the count went down.
		Oversold: sold + left - units,
		Retries:  retries, Seconds: elapsed.Seconds(), PerSecond: float64(sold) / elapsed.Seconds(),
	}, nil
}

// showProgress prints the units sold so far, in place, until stopped.
func showProgress(ctx context.Context, w io.Writer, st *stock, name string, units int) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
				if n, err := st.units(ctx); err == nil {
					fmt.Fprintf(w, "\r\033[K%s: sold %d of %d", name, units-n, units)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// buyAll runs workers goroutines in this process until the item is sold
// out. They share one Locker (or optimistic Table), as goroutines of one
// service would.
func buyAll(ctx context.Context, db *sql.DB, t target, s strategy, item string, workers int, work time.Duration) (sold, retries int, err error) {
	d := t.dialect
	var l sqllock.Locker
	if s.newLocker != nil {
		var closeLocker func()
		if l, closeLocker, err = s.newLocker(db, d, lockers.Opts{Pooler: t.pooler, SingleWriter: t.singleWriter}); err != nil {
			return 0, 0, err
		}
		defer closeLocker()
	}
	st, err := newStock(db, d, item, work, t.pooler)
	if err != nil {
		return 0, 0, err
	}
	defer st.close()
	var nSold, nRetries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				ok, r, err := s.buy(ctx, l, st)
				nRetries.Add(int64(r))
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				nSold.Add(1)
			}
			errs <- ctx.Err()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	return int(nSold.Load()), int(nRetries.Load()), nil
}

// workerCommand is the hidden command a demo re-executes this binary with.
const workerCommand = "__worker"

// buyInChildren spreads the workers over procs copies of this binary.
func buyInChildren(ctx context.Context, t target, s strategy, item string, workers, procs int, work time.Duration) (sold, retries int, err error) {
	type out struct {
		Sold    int `json:"sold"`
		Retries int `json:"retries"`
	}
	results := make([]out, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		n := workers / procs
		if i < workers%procs {
			n++
		}
		cmd, err := child(ctx, t, "stock", "--strategy", s.name, "--item", item, "--workers", strconv.Itoa(n), "--work", work.String())
		if err != nil {
			return 0, 0, err
		}
		wg.Go(func() {
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("worker process %d: %v: %s", i+1, err, bytes.TrimSpace(stderr.Bytes()))
				return
			}
			errs[i] = json.Unmarshal(stdout.Bytes(), &results[i])
		})
	}
	wg.Wait()
	for i := range procs {
		if errs[i] != nil {
			return 0, 0, errs[i]
		}
		sold += results[i].Sold
		retries += results[i].Retries
	}
	return sold, retries, nil
}

// child returns a command re-running this binary as a demo worker on t. The
// DSN travels in the environment, not on a command line others can read;
// the embedded database, which has no secret, as its folder.
func child(ctx context.Context, t target, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if t.embedded {
		args = append(args, "--data-dir", filepath.Dir(t.path))
	}
	cmd := exec.CommandContext(ctx, self, append([]string{workerCommand}, args...)...)
	cmd.Env = append(os.Environ(), "SQLLOCK_DSN="+t.raw)
	return cmd, nil
}

// cmdWorker is the child side of the demos.
func cmdWorker(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return fail(exitUsage, "%s needs a kind", workerCommand)
	}
	switch args[0] {
	case "stock":
		var df dbFlags
		fs := newFlags(workerCommand+" stock", e, &df)
		name := fs.String("strategy", "", "")
		item := fs.String("item", "", "")
		workers := fs.Int("workers", 1, "")
		work := fs.Duration("work", 0, "")
		if _, err := parseArgs(fs, args[1:]); err != nil {
			return err
		}
		return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
			run, _, err := pick(*name, t.dialect, nil)
			if err != nil {
				return err
			}
			sold, retries, err := buyAll(ctx, db, t, run[0], *item, *workers, *work)
			if err != nil {
				return err
			}
			return json.NewEncoder(e.stdout).Encode(map[string]int{"sold": sold, "retries": retries})
		})
	case "job":
		return jobWorker(ctx, args[1:], e)
	case "waiter":
		return waiterWorker(ctx, args[1:], e)
	}
	return fail(exitUsage, "%s: unknown kind %q", workerCommand, args[0])
}

// scanLines feeds each line of r to fn.
func scanLines(r io.Reader, fn func([]byte)) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	return sc.Err()
}
