package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/holds"
)

// watchSpec is what `sqllock locks --watch` shows and how often.
type watchSpec struct {
	table     string // the tablelock table: its waiters listen on its channel
	namespace string
	names     []string
	every     time.Duration
	frames    int             // stop after this many; 0: until the context ends
	kinds     map[string]bool // the kinds shown
}

// waiter is a session the server shows waiting for a lock.
type waiter = holds.Waiter

// watchLocks redraws the held locks every w.every until ctx ends (Ctrl-C):
// holder host/pid, held for, expires in and token, on the database's clock;
// on PostgreSQL also the sessions waiting for a lock as the server shows
// them. On a terminal each frame replaces the last.
func watchLocks(ctx context.Context, e env, t target, src *holdSource, w watchSpec) error {
	db := src.DB
	clear := isTerminal(e.stdout)
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for frame := 1; ; frame++ {
		rows, err := src.list(ctx, w.kinds)
		if err != nil {
			return err
		}
		if w.kinds[kindAdvisory] {
			adv, _, err := advisoryLocks(ctx, db, t.dialect, w.namespace, w.names)
			if err != nil {
				return err
			}
			rows = append(rows, adv...)
		}
		var waiters []waiter
		listening := -1
		if c := dialect.Of(t.dialect); c.LockWaiters && c.Announces {
			if waiters, err = holds.PGWaiters(ctx, db); err != nil {
				return err
			}
			if listening, err = holds.PGListeners(ctx, db, dialect.NotifyChannel(w.table)); err != nil {
				return err
			}
		}
		if clear {
			fmt.Fprint(e.stdout, "\x1b[H\x1b[2J")
		}
		fmt.Fprintf(e.stdout, "sqllock locks on %s at %s (every %v; Ctrl-C to stop)\n\n", t.display, stamp(time.Now()), w.every)
		printWatch(e.stdout, t, rows, waiters, listening)
		if w.frames > 0 && frame >= w.frames {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func printWatch(w io.Writer, t target, rows []lockRow, waiters []waiter, listening int) {
	printLocks(w, t, rows, true)
	if listening > 0 {
		fmt.Fprintf(w, "\n%d session(s) listening for tablelock releases: processes with an Acquire waiting\n", listening)
	}
	if len(waiters) > 0 {
		fmt.Fprintln(w, "\nsessions waiting for a lock (rowlock, advisory, a FOR UPDATE):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PID\tAPP\tHOST\tWAITING\tBLOCKED BY\tQUERY")
		for _, x := range waiters {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", x.PID, safe(x.App), safe(x.Host), span(x.Waiting), safe(x.BlockedBy), safe(x.Query))
		}
		tw.Flush()
	}
}

// isTerminal reports whether w is a character device: a person's screen,
// where a frame can replace the last one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
