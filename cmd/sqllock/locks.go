package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/holds"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/tablelock"
)

func cmdLocks(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("locks", e, &df)
	table := fs.String("table", tablelock.DefaultTable, "tablelock table")
	kinds := fs.String("kind", strings.Join(allKinds, ","), "the kinds to list (locks, jobs, semaphores, rwlocks, leaders, advisory; separated by commas); release: the kind of KEY")
	force := fs.Bool("force", false, "release: really free the lock")
	job := fs.Bool("job", false, "release: KEY names a jobguard job (--kind job)")
	slotFlag := fs.String("slot", "", "release: which row of KEY: a semaphore's permit slot, an rwlock's reader row, or \"writer\"")
	reason := fs.String("reason", "", "release: why, for the audit trail (required with --force)")
	audit := fs.Bool("audit", false, "list the audit trail of force releases instead of the locks")
	asJSON := fs.Bool("json", false, "print the list as JSON (values escaped the JSON way; every other output shows a value with a control character Go-quoted)")
	var names []string
	fs.Func("key", "an advisory key to name in the list (repeat it); on MariaDB without performance_schema, the keys to look up", func(k string) error {
		if err := sqllock.ValidateKey(k); err != nil {
			return err
		}
		names = append(names, k)
		return nil
	})
	namespace := fs.String("namespace", advisory.DefaultNamespace, "the advisory Lockers' namespace (advisory.WithNamespace)")
	watch := fs.Bool("watch", false, "redraw the list every --every until Ctrl-C: holder, held for, expires in, token; on PostgreSQL also the sessions waiting")
	every := fs.Duration("every", time.Second, "watch: the refresh interval")
	frames := fs.Int("frames", 0, "watch: stop after this many refreshes (0: until Ctrl-C)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	want, err := parseKinds(*kinds)
	if err != nil {
		return fail(exitUsage, "locks: %v", err)
	}
	if *watch && (*asJSON || len(pos) > 0) {
		return fail(exitUsage, "locks: --watch lists only, as a table: no --json, no release")
	}
	if *every < 100*time.Millisecond || *frames < 0 {
		return fail(exitUsage, "locks: --every must be at least 100ms and --frames not negative")
	}
	var rel releaseSpec
	switch {
	case len(pos) == 0:
	case *audit:
		return fail(exitUsage, "usage: sqllock locks --audit (no action)")
	case pos[0] == "release" && len(pos) == 2:
		if rel, err = parseRelease(pos[1], *kinds, want, *job, *slotFlag); err != nil {
			return err
		}
		if *force && strings.TrimSpace(*reason) == "" {
			return fail(exitUsage, "locks release %q: --force needs --reason \"why\" for the audit trail", pos[1])
		}
		rel.force, rel.reason = *force, *reason
		want = map[string]bool{rel.kind: true}
	case pos[0] == "release":
		return fail(exitUsage, "usage: sqllock locks release KEY --force --reason WHY [--kind K] [--slot N|writer]")
	default:
		return fail(exitUsage, "locks: unknown action %q: want no action (list) or release KEY", pos[0])
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		if *audit {
			return printAudit(ctx, e, t, db, *table, *asJSON)
		}
		src, err := openSource(ctx, db, t.dialect, *table, t.pooler)
		if err != nil {
			return err
		}
		defer src.Close()
		if *watch {
			return watchLocks(ctx, e, t, src, watchSpec{table: *table, namespace: *namespace, names: names, every: *every, frames: *frames, kinds: want})
		}
		rows, err := src.list(ctx, want)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return releaseLock(ctx, e, src, rows, rel)
		}
		var notes []string
		if want[kindAdvisory] {
			adv, n, err := advisoryLocks(ctx, db, t.dialect, *namespace, names)
			if err != nil {
				return err
			}
			rows, notes = append(rows, adv...), n
			if dialect.Of(t.dialect).RowLocks {
				notes = append(notes, "not shown: rowlock leases, which are row locks of open transactions (the server lists those transactions, not keys)")
			}
		}
		notesTo := e.stdout
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if rows == nil {
				rows = []lockRow{}
			}
			if err := enc.Encode(rows); err != nil {
				return err
			}
			notesTo = e.stderr
		} else {
			printLocks(e.stdout, t, rows, false)
		}
		for _, n := range notes {
			fmt.Fprintln(notesTo, "note: "+safe(n))
		}
		return nil
	})
}

// group is one section of the table: the rows of a kind, and how they
// print. cells returns the row's columns before the time columns, each
// value from the database already passed through safe.
type group struct {
	kind, title string
	header      []string
	cells       func(r lockRow) []string
}

var groups = []group{
	{kindLock, "locks", []string{"KEY", "OWNER", "HOLDER HOST/PID", "TOKEN", "HOLDS"}, func(r lockRow) []string {
		return []string{safe(r.Key), safe(r.Owner), safe(r.Host), fmt.Sprint(r.Token), fmt.Sprint(r.Holds)}
	}},
	{kindJob, "jobs", []string{"JOB", "STATE", "NEXT DUE", "OWNER", "HOLDER HOST/PID", "TOKEN"}, func(r lockRow) []string {
		return []string{safe(r.Key), r.State, stamp(r.NextDue), safe(r.Owner), safe(r.Host), fmt.Sprint(r.Token)}
	}},
	{kindSemaphore, "semaphore permits", []string{"KEY", "SLOT", "HELD", "HOLDER", "HOLDER HOST/PID", "TOKEN"}, func(r lockRow) []string {
		slot := r.SlotText()
		if r.Of > 0 { // the count the Semaphore declared (migration 00017)
			slot += " of " + strconv.Itoa(r.Of)
		}
		return []string{safe(r.Key), slot, r.HeldText(), safe(r.Owner), safe(r.Host), fmt.Sprint(r.Token)}
	}},
	{kindRWLock, "rwlock holds", []string{"KEY", "HOLD", "READERS", "WRITER WAITING", "HOLDER HOST/PID", "TOKEN"}, func(r lockRow) []string {
		return []string{safe(r.Key), r.HoldText(), fmt.Sprint(r.Readers), r.WriterWaitingText(), safe(r.Host), fmt.Sprint(r.Token)}
	}},
	{kindLeader, "leaders", []string{"ELECTION", "VALUE", "TERM", "SINCE", "HOLDER HOST/PID"}, func(r lockRow) []string {
		return []string{safe(r.Key), safe(r.Value), fmt.Sprint(r.Term), stamp(r.Since), safe(r.Host)}
	}},
	{kindAdvisory, "advisory locks, as the server shows them", []string{"KEY", "SESSION", "HOLDER HOST/PID", "STATE"}, func(r lockRow) []string {
		return []string{safe(r.Key), safe(r.Owner), safe(r.Host), r.State}
	}},
}

// printLocks prints rows grouped by kind. The list shows when each hold
// began and ends; a watch frame how long it has been held and how long it
// has left, both on the database's clock.
func printLocks(w io.Writer, t target, rows []lockRow, watch bool) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no locks held on %s\n", t.display)
		return
	}
	first := true
	for _, g := range groups {
		var of []lockRow
		for _, r := range rows {
			if r.Kind == g.kind {
				of = append(of, r)
			}
		}
		if len(of) == 0 {
			continue
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		fmt.Fprintf(w, "%s (%d)\n", g.title, len(of))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		header := g.header
		if g.kind != kindAdvisory { // the server keeps no times of those
			if watch {
				header = append(header[:len(header):len(header)], "HELD FOR", "EXPIRES IN")
			} else {
				start := "ACQUIRED"
				if g.kind == kindJob {
					start = "LAST RUN"
				}
				header = append(header[:len(header):len(header)], start, "EXPIRES", "HELD FOR")
			}
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range of {
			cells := g.cells(r)
			held := time.Duration(r.HeldForMS) * time.Millisecond
			switch {
			case g.kind == kindAdvisory:
			case watch:
				// Both on the database's clock: now is acquired + held for.
				cells = append(cells, span(held), span(r.Expires.Sub(r.Acquired.Add(held))))
			default:
				cells = append(cells, stamp(r.Acquired), stamp(r.Expires), span(held))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		tw.Flush()
	}
}

// releaseSpec is what `locks release` frees: a row of a kind.
type releaseSpec struct {
	key, kind string
	slot      int  // the semaphore slot or rwlock reader row; -1: any, if one
	writer    bool // the rwlock's writer
	force     bool
	reason    string
}

// parseRelease reads release's KEY, --kind (or --job) and --slot.
func parseRelease(key, kinds string, want map[string]bool, job bool, slot string) (releaseSpec, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return releaseSpec{}, fail(exitUsage, "locks release: %v", err)
	}
	r := releaseSpec{key: key, kind: kindLock, slot: -1}
	switch {
	case job:
		r.kind = kindJob
	case kinds != strings.Join(allKinds, ","):
		if len(want) != 1 {
			return releaseSpec{}, fail(exitUsage, "locks release %q: --kind names one kind", key)
		}
		for k := range want {
			r.kind = k
		}
	}
	switch {
	case r.kind == kindAdvisory:
		return releaseSpec{}, fail(exitUsage, "locks release %q: an advisory lock belongs to a database session and cannot be forced from here; end the session (pg_terminate_backend(pid) on PostgreSQL, KILL id on MySQL)", key)
	case slot == "":
	case r.kind == kindRWLock && slot == "writer":
		r.writer = true
	case r.kind == kindSemaphore || r.kind == kindRWLock:
		n, err := strconv.Atoi(slot)
		if err != nil || n < 0 {
			return releaseSpec{}, fail(exitUsage, "locks release %q: --slot %q: want a slot number from 0 (or writer, for an rwlock)", key, slot)
		}
		r.slot = n
	default:
		return releaseSpec{}, fail(exitUsage, "locks release %q: --slot is for a semaphore's permits and an rwlock's rows, not a %s", key, r.kind)
	}
	return r, nil
}

// releaseLock frees a row for an operator. Without force it only says
// what it would do, and changes nothing.
func releaseLock(ctx context.Context, e env, src *holdSource, rows []lockRow, rel releaseSpec) error {
	kind, key := rel.kind, rel.key
	var found []lockRow
	for _, r := range rows {
		switch {
		case r.Kind != kind || r.Key != key:
		case rel.writer && r.Slot != nil, rel.slot >= 0 && (r.Slot == nil || *r.Slot != rel.slot):
		default:
			found = append(found, r)
		}
	}
	switch {
	case len(found) == 0:
		return fail(exitFailure, "%s %q is not held%s; nothing to release", kind, key, slotSaid(rel))
	case len(found) > 1:
		var parts []string
		for _, r := range found {
			parts = append(parts, r.Part())
		}
		return fail(exitUsage, "%s %q has %d rows held (%s): name one with --slot", kind, key, len(found), strings.Join(parts, ", "))
	}
	held := found[0]
	what := describe(held)
	if !rel.force {
		consequence := "its holder's lease ends with ErrLockLost at its next renewal, and a waiter may take the key at once"
		switch kind {
		case kindJob:
			consequence = "the next replica to fire runs the job, even if this run is still working"
		case kindLeader:
			consequence = "the leader learns of the loss at its next renewal, and another campaigner may lead at once: for a moment two may act as leader, which fencing by term guards against"
		}
		return fail(exitUsage, "refusing to release %s without --force: %s", what, consequence)
	}
	// Free the holder shown, not whoever holds the row by now.
	ok, err := src.ForceRelease(ctx, held, tablelock.Reason(rel.reason))
	switch {
	case errors.Is(err, sqllock.ErrNotHeld):
		return fail(exitFailure, "%s %q changed hands since it was shown (token %d): %s", kind, key, held.Token, safe(err.Error()))
	case err != nil:
		return err
	case !ok:
		return fail(exitFailure, "%s %q was released before the force release reached it", kind, key)
	}
	fmt.Fprintf(e.stdout, "released %s; recorded in the audit trail (sqllock locks --audit)\n", what)
	return nil
}

func slotSaid(rel releaseSpec) string {
	switch {
	case rel.writer:
		return " by a writer"
	case rel.slot >= 0:
		return fmt.Sprintf(" in slot %d", rel.slot)
	}
	return ""
}

// describe names a held row for a message, its values made safe.
func describe(r lockRow) string {
	name := r.Kind + " " + strconv.Quote(r.Key)
	if p := r.Part(); p != "" {
		name += " " + p
	}
	return fmt.Sprintf("%s (owner %s, host %s, token %d, expires %s)", name, safe(r.Owner), safe(r.Host), r.Token, stamp(r.Expires))
}

// printAudit lists the audit trail, oldest first.
func printAudit(ctx context.Context, e env, t target, db *sql.DB, lockTable string, asJSON bool) error {
	rows, err := holds.Audit(ctx, db, lockTable)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(e.stdout, "no force releases recorded on %s\n", t.display)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTION\tTABLE\tKIND\tKEY\tTOKEN\tOWNER\tHOST\tOPERATOR\tREASON")
	for _, r := range rows {
		key := safe(r.Key)
		if r.Part != "" {
			key += " " + r.Part
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", stamp(r.At), safe(r.Action), safe(r.Table), r.Kind, key, r.Token,
			safe(r.Owner), safe(r.Host), safe(r.Operator), safe(r.Reason))
	}
	return tw.Flush()
}

// cmdHold holds a lock until --for passes, the context ends (Ctrl-C) or the
// lease is lost: a way to watch locks, force-release and loss by hand.
func cmdHold(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("hold", e, &df)
	ttl := fs.Duration("ttl", tablelock.DefaultTTL, "lease length; renewed every ttl/3")
	hold := fs.Duration("for", time.Hour, "how long to hold before releasing")
	owner := fs.String("owner", "", "owner id (default: a random one)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fail(exitUsage, "usage: sqllock hold KEY [--for 1h] [--ttl 30s]")
	}
	key := pos[0]
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		opts := []tablelock.Option{tablelock.WithTTL(*ttl), tablelock.WithSingleWriter(t.singleWriter)}
		if t.pooler {
			opts = append(opts, tablelock.WithTransactionPooler())
		}
		l, err := tablelock.New(db, t.dialect, opts...)
		if err != nil {
			return fail(exitUsage, "hold: %v", err)
		}
		defer l.Close()
		actx := ctx
		if *owner != "" {
			actx = sqllock.WithOwner(ctx, *owner)
		}
		lease, err := l.Acquire(actx, key)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "held %q token %d host %s; until %v, Ctrl-C or loss\n", key, lease.Token(), identity.Host(), *hold)
		select {
		case <-lease.Done():
			return fail(exitFailure, "lost %q: %v", key, lease.Err())
		case <-ctx.Done():
		case <-time.After(*hold):
		}
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			if errors.Is(err, sqllock.ErrLockLost) {
				return fail(exitFailure, "lost %q: %v", key, err)
			}
			return err
		}
		fmt.Fprintf(e.stdout, "released %q\n", key)
		return nil
	})
}
