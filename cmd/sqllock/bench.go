package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/sqllock/sqllock/cmd/sqllock/internal/bench"
)

// cmdBench is `sqllock bench`: its flags here, the harness in package bench.
func cmdBench(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("bench", e, &df)
	var cfg bench.Config
	fs.DurationVar(&cfg.Duration, "duration", time.Second, "length of each rate measurement")
	fs.IntVar(&cfg.Clients, "clients", 8, "clients contending for the hot key")
	fs.IntVar(&cfg.Handoffs, "handoffs", 50, "handoffs timed for the latency percentiles, after two untimed (a waiter's first waits open its sessions)")
	fs.BoolVar(&cfg.Multi, "multi", true, "also the multi-client cases (tablelock, advisory): a pool and a Locker per client, a waiter in another process")
	fs.DurationVar(&cfg.Idle, "idle", time.Second, "window in which an idle waiter's statements are counted; 0 skips")
	strat := fs.String("strategy", "all", "comma-separated strategies, or all")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fail(exitUsage, "bench takes no arguments, got %q", pos[0])
	case cfg.Duration <= 0 || cfg.Clients < 1 || cfg.Handoffs < 1:
		return fail(exitUsage, "bench: --duration must be positive, --clients and --handoffs at least 1")
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		run, skipped, err := pick(*strat, t.dialect, func(s strategy) bool { return bench.Has(s.name) })
		if err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(e.stdout, "bench on %s: %v per rate, %d hot-key clients, %d handoffs\n", t.display, cfg.Duration, cfg.Clients, cfg.Handoffs)
			if t.pooler {
				fmt.Fprintf(e.stdout, "through a transaction pooler (%s=transaction): both sides unprepared, waiters polling, advisory locks in transactions\n", poolerParam)
			}
		}
		names := make([]string, len(run))
		for i, s := range run {
			names[i] = s.name
		}
		skips := make([]bench.Skip, len(skipped))
		for i, s := range skipped {
			skips[i] = bench.Skip(s)
		}
		return bench.Run(ctx, db, benchTarget(t), names, skips, cfg, e.stdout, *asJSON)
	})
}

// benchTarget is t as the harness takes it.
func benchTarget(t target) bench.Target {
	return bench.Target{Display: t.display, Driver: t.driver, DSN: t.dsn, Dialect: t.dialect, Pooler: t.pooler,
		Child: func(ctx context.Context, args ...string) (*exec.Cmd, error) { return child(ctx, t, args...) }}
}

// waiterWorker is the child side of bench's handoff to another process.
func waiterWorker(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags(workerCommand+" waiter", e, &df)
	name := fs.String("strategy", "", "")
	sideName := fs.String("side", "lib", "")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		err := bench.Waiter(ctx, db, benchTarget(t), *name, *sideName, os.Stdin, e.stdout)
		if errors.Is(err, bench.ErrNoMulti) {
			return fail(exitUsage, "%v", err)
		}
		return err
	})
}
