package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/jobguard"
)

// jobEvent is one replica's firing of the demo job.
type jobEvent struct {
	Period  int    `json:"period"`
	Replica string `json:"replica"`
	Ran     bool   `json:"ran"`
	Token   int64  `json:"token,omitempty"`
	FiredMS int64  `json:"fired_ms"` // after the period's start: the replica's schedule skew
}

type jobPeriod struct {
	Period  int      `json:"period"`
	Runs    int      `json:"runs"`
	RanBy   []string `json:"ran_by"`
	Tokens  []int64  `json:"tokens"`
	Skipped int      `json:"skipped"`
}

type jobReport struct {
	Database string      `json:"database"`
	Job      string      `json:"job"`
	Replicas int         `json:"replicas"`
	Procs    int         `json:"procs"`
	PeriodMS int64       `json:"period_ms"`
	AtMostMS int64       `json:"at_most_ms"`
	AtLeast  int64       `json:"at_least_ms"`
	Periods  []jobPeriod `json:"periods"`
	OK       bool        `json:"exactly_once_per_period"`
}

// jobSchedule is what every replica of the demo agrees on.
type jobSchedule struct {
	name    string
	start   time.Time // start of period 0, on the machine's clock
	period  time.Duration
	periods int
}

func (s jobSchedule) job() jobguard.Job {
	// AtLeast above the schedule skew (at most period/5) so a late replica
	// skips, and below the period so the next firing runs.
	return jobguard.Job{Name: s.name, AtMost: s.period, AtLeast: s.period / 2}
}

func cmdJob(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("demo job", e, &df)
	replicas := fs.Int("replicas", 3, "replicas that each fire the job once a period")
	periods := fs.Int("periods", 4, "periods to run")
	period := fs.Duration("period", 500*time.Millisecond, "the job's schedule: it should run once per period")
	procs := fs.Int("procs", 1, "processes to run the replicas in (this binary re-executed)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fail(exitUsage, "demo job takes no arguments, got %q", pos[0])
	case *replicas < 1 || *periods < 1 || *procs < 1:
		return fail(exitUsage, "demo job: --replicas, --periods and --procs must be at least 1")
	case *procs > *replicas:
		return fail(exitUsage, "demo job: --procs %d exceeds --replicas %d", *procs, *replicas)
	case *period < 100*time.Millisecond:
		return fail(exitUsage, "demo job: --period %v is below 100ms", *period)
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		sch := jobSchedule{
			name: fmt.Sprintf("sqllock-demo/nightly-%x", rand.Uint64()),
			// Far enough ahead for worker processes to start.
			start:   time.Now().Add(300 * time.Millisecond).Truncate(*period).Add(*period),
			period:  *period,
			periods: *periods,
		}
		defer deleteJob(context.WithoutCancel(ctx), db, t.dialect, sch.name)
		if !*asJSON {
			j := sch.job()
			fmt.Fprintf(e.stdout, "%d replicas in %d process(es) fire job %q every %v for %d periods, on %s\n",
				*replicas, *procs, sch.name, sch.period, sch.periods, t.display)
			fmt.Fprintf(e.stdout, "each replica fires up to %v late; hold-at-most %v, hold-at-least %v\n\n", sch.period/5, j.AtMost, j.AtLeast)
		}
		var mu sync.Mutex
		var events []jobEvent
		emit := func(ev jobEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
		if *procs == 1 {
			err = runReplicas(ctx, db, t, sch, 1, *replicas, emit)
		} else {
			err = replicasInChildren(ctx, t, sch, *replicas, *procs, emit)
		}
		if err != nil {
			return fmt.Errorf("demo job: %v", err)
		}
		rep := summarizeJob(t, sch, *replicas, *procs, events)
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			printJob(e.stdout, rep)
		}
		if !rep.OK {
			return fail(exitFailure, "demo job: the job did not run exactly once in every period")
		}
		return nil
	})
}

func summarizeJob(t target, sch jobSchedule, replicas, procs int, events []jobEvent) jobReport {
	j := sch.job()
	rep := jobReport{Database: t.display, Job: sch.name, Replicas: replicas, Procs: procs,
		PeriodMS: sch.period.Milliseconds(), AtMostMS: j.AtMost.Milliseconds(), AtLeast: j.AtLeast.Milliseconds(), OK: true}
	// A run held up past its period counts in the one it ran in, which
	// may be one past the schedule's last.
	periods := sch.periods
	for _, ev := range events {
		periods = max(periods, ev.Period+1)
	}
	for i := range periods {
		p := jobPeriod{Period: i + 1, RanBy: []string{}, Tokens: []int64{}}
		for _, ev := range events {
			switch {
			case ev.Period != i:
			case ev.Ran:
				p.Runs++
				p.RanBy = append(p.RanBy, fmt.Sprintf("%s (+%dms)", ev.Replica, ev.FiredMS))
				p.Tokens = append(p.Tokens, ev.Token)
			default:
				p.Skipped++
			}
		}
		if p.Runs != 1 {
			rep.OK = false
		}
		rep.Periods = append(rep.Periods, p)
	}
	// Every replica fired once a period and said what came of it.
	if len(events) != replicas*sch.periods {
		rep.OK = false
	}
	return rep
}

func printJob(w io.Writer, rep jobReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "period\truns\tran by (fired after period start)\ttoken\tskipped")
	for _, p := range rep.Periods {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\n", p.Period, p.Runs, strings.Join(p.RanBy, ", "), joinInts(p.Tokens), p.Skipped)
	}
	tw.Flush()
	if rep.OK {
		fmt.Fprintf(w, "\nran exactly once in each of %d periods\n", len(rep.Periods))
	} else {
		fmt.Fprintln(w, "\nFAILED: some period did not run exactly once")
	}
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ", ")
}

// runReplicas runs replicas first..first+n-1 as goroutines, each with its
// own Guard, as separate services would have.
func runReplicas(ctx context.Context, db *sql.DB, t target, sch jobSchedule, first, n int, emit func(jobEvent)) error {
	opts := []jobguard.Option{jobguard.WithSingleWriter(t.singleWriter)}
	if t.pooler {
		opts = append(opts, jobguard.WithTransactionPooler())
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		g, err := jobguard.New(db, t.dialect, opts...)
		if err != nil {
			return err
		}
		defer g.Close()
		label := fmt.Sprintf("replica %d (pid %d)", first+i, os.Getpid())
		wg.Go(func() { errs[i] = replica(ctx, g, sch, label, emit) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// replica fires the job once a period, up to period/5 late, as a replica
// whose clock or scheduler is slightly off would.
func replica(ctx context.Context, g *jobguard.Guard, sch jobSchedule, label string, emit func(jobEvent)) error {
	for i := range sch.periods {
		periodStart := sch.start.Add(time.Duration(i) * sch.period)
		fire := periodStart.Add(rand.N(sch.period / 5))
		select {
		case <-time.After(time.Until(fire)):
		case <-ctx.Done():
			return ctx.Err()
		}
		var token int64
		// A run counts in the period it starts in: a replica held up past
		// the period's end (a loaded machine) runs in the next one, and
		// the replicas that fire there skip it.
		period := i
		ran, err := g.Run(ctx, sch.job(), func(ctx context.Context) error {
			token, _ = sqllock.TokenFrom(ctx)
			period = int(time.Since(sch.start) / sch.period)
			select { // the job's work
			case <-time.After(sch.period / 10):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			return err
		}
		emit(jobEvent{Period: period, Replica: label, Ran: ran, Token: token, FiredMS: fire.Sub(periodStart).Milliseconds()})
	}
	return nil
}

// replicasInChildren spreads the replicas over procs copies of this binary,
// which print their events as JSON lines.
func replicasInChildren(ctx context.Context, t target, sch jobSchedule, replicas, procs int, emit func(jobEvent)) error {
	var wg sync.WaitGroup
	errs := make([]error, procs)
	first := 1
	for i := range procs {
		n := replicas / procs
		if i < replicas%procs {
			n++
		}
		cmd, err := child(ctx, t, "job", "--name", sch.name, "--start", strconv.FormatInt(sch.start.UnixNano(), 10),
			"--period", sch.period.String(), "--periods", strconv.Itoa(sch.periods),
			"--first", strconv.Itoa(first), "--replicas", strconv.Itoa(n))
		if err != nil {
			return err
		}
		first += n
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			err := scanLines(out, func(line []byte) {
				var ev jobEvent
				if json.Unmarshal(line, &ev) == nil {
					emit(ev)
				}
			})
			if werr := cmd.Wait(); werr != nil {
				err = fmt.Errorf("replica process %d: %v: %s", i+1, werr, strings.TrimSpace(stderr.String()))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func jobWorker(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags(workerCommand+" job", e, &df)
	name := fs.String("name", "", "")
	start := fs.Int64("start", 0, "")
	period := fs.Duration("period", time.Second, "")
	periods := fs.Int("periods", 1, "")
	first := fs.Int("first", 1, "")
	replicas := fs.Int("replicas", 1, "")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		sch := jobSchedule{name: *name, start: time.Unix(0, *start), period: *period, periods: *periods}
		var mu sync.Mutex
		enc := json.NewEncoder(e.stdout)
		return runReplicas(ctx, db, t, sch, *first, *replicas, func(ev jobEvent) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(ev)
		})
	})
}

// deleteJob removes the demo's job row: demo runs should leave no trace in
// sqllock_jobs.
func deleteJob(ctx context.Context, db *sql.DB, d sqllock.Dialect, name string) {
	q := `DELETE FROM sqllock_jobs WHERE lock_key = ?`
	if dialect.Of(d).NumberedParams {
		q = `DELETE FROM sqllock_jobs WHERE lock_key = $1`
	}
	_, _ = db.ExecContext(ctx, q, name)
}
