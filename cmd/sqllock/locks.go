package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/tablelock"
)

// lockRow is one line of `sqllock locks`: a tablelock lock, a jobguard job,
// or an advisory lock as the server shows it (no token, no times: those
// the server does not keep).
type lockRow struct {
	Kind      string    `json:"kind"` // "lock", "job" or "advisory"
	Key       string    `json:"key"`
	Owner     string    `json:"owner"` // jobs: "running" or "done (hold-at-least)"; advisory: the session
	Host      string    `json:"host"`
	Holds     int       `json:"holds,omitempty"`
	Token     int64     `json:"token,omitempty"`
	Acquired  time.Time `json:"acquired,omitzero"`
	Expires   time.Time `json:"expires,omitzero"`
	HeldForMS int64     `json:"held_for_ms,omitempty"`
	State     string    `json:"state,omitempty"` // advisory: "held" or "waiting", "(shared)"
}

func cmdLocks(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("locks", e, &df)
	table := fs.String("table", tablelock.DefaultTable, "tablelock table")
	force := fs.Bool("force", false, "release: really free the lock")
	job := fs.Bool("job", false, "release: KEY names a jobguard job, not a lock")
	reason := fs.String("reason", "", "release: why, for the audit trail (required with --force)")
	audit := fs.Bool("audit", false, "list the audit trail of force releases instead of the locks")
	asJSON := fs.Bool("json", false, "print the list as JSON")
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
	if *watch && (*asJSON || len(pos) > 0) {
		return fail(exitUsage, "locks: --watch lists only, as a table: no --json, no release")
	}
	if *every < 100*time.Millisecond || *frames < 0 {
		return fail(exitUsage, "locks: --every must be at least 100ms and --frames not negative")
	}
	switch {
	case len(pos) == 0:
	case *audit:
		return fail(exitUsage, "usage: sqllock locks --audit (no action)")
	case pos[0] == "release" && len(pos) == 2:
		if *force && strings.TrimSpace(*reason) == "" {
			return fail(exitUsage, "locks release %q: --force needs --reason \"why\" for the audit trail", pos[1])
		}
	case pos[0] == "release":
		return fail(exitUsage, "usage: sqllock locks release KEY --force --reason WHY")
	default:
		return fail(exitUsage, "locks: unknown action %q: want no action (list) or release KEY", pos[0])
	}
	return withDB(ctx, df, needMigrated, func(t target, db *sql.DB) error {
		if *audit {
			return printAudit(ctx, e, t, db, *asJSON)
		}
		l, err := tablelock.New(db, t.dialect, tablelock.WithTable(*table), tablelock.WithNotify(false))
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer l.Close()
		g, err := jobguard.New(db, t.dialect)
		if err != nil {
			return err
		}
		defer g.Close()
		// A database migrated before jobguard shipped has no job table.
		if ok, err := tableExists(ctx, db, t.dialect, jobguard.DefaultTable); err != nil || !ok {
			g = nil
		}
		if *watch {
			return watchLocks(ctx, e, t, db, l, g, watchSpec{table: *table, namespace: *namespace, names: names, every: *every, frames: *frames})
		}
		rows, err := listLocks(ctx, l, g)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			adv, notes, err := advisoryLocks(ctx, db, t.dialect, *namespace, names)
			if err != nil {
				return err
			}
			rows = append(rows, adv...)
			if t.dialect != sqllock.SQLite {
				notes = append(notes, "not shown: rowlock leases, which are row locks of open transactions (the server lists those transactions, not keys)")
			}
			notesTo := e.stdout
			if *asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rows); err != nil {
					return err
				}
				notesTo = e.stderr
			} else {
				printLocks(e.stdout, t, rows)
			}
			for _, n := range notes {
				fmt.Fprintln(notesTo, "note: "+n)
			}
			return nil
		}
		return releaseLock(ctx, e, l, g, rows, pos[1], *job, *force, *reason)
	})
}

func listLocks(ctx context.Context, l *tablelock.Locker, g *jobguard.Guard) ([]lockRow, error) {
	infos, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	rows := []lockRow{}
	for _, in := range infos {
		rows = append(rows, lockRow{Kind: "lock", Key: in.Key, Owner: in.Owner, Host: in.Host, Holds: in.Holds, Token: in.Token,
			Acquired: in.AcquiredAt, Expires: in.ExpiresAt, HeldForMS: in.HeldFor.Milliseconds()})
	}
	if g == nil {
		return rows, nil
	}
	jobs, err := g.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		state := "done (hold-at-least)"
		if j.Holds > 0 {
			state = "running"
		}
		rows = append(rows, lockRow{Kind: "job", Key: j.Key, Owner: state, Host: j.Host, Token: j.Token,
			Acquired: j.AcquiredAt, Expires: j.ExpiresAt, HeldForMS: j.HeldFor.Milliseconds()})
	}
	return rows, nil
}

func printLocks(w io.Writer, t target, rows []lockRow) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no locks held on %s\n", t.display)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tKEY\tOWNER\tHOST\tTOKEN\tACQUIRED\tEXPIRES\tHELD FOR")
	for _, r := range rows {
		if r.Kind == "advisory" { // the server keeps no token nor times
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t%s\n", r.Kind, r.Key, r.Owner, r.Host, r.State)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%v\n", r.Kind, r.Key, r.Owner, r.Host, r.Token,
			r.Acquired.Format(time.RFC3339), r.Expires.Format(time.RFC3339Nano), (time.Duration(r.HeldForMS) * time.Millisecond).Round(time.Millisecond))
	}
	tw.Flush()
}

// releaseLock frees key for an operator. Without force it only says what it
// would do, and changes nothing.
func releaseLock(ctx context.Context, e env, l *tablelock.Locker, g *jobguard.Guard, rows []lockRow, key string, job, force bool, reason string) error {
	kind := "lock"
	if job {
		kind = "job"
	}
	if err := sqllock.ValidateKey(key); err != nil {
		return fail(exitUsage, "locks release: %v", err)
	}
	var held *lockRow
	for i := range rows {
		if rows[i].Kind == kind && rows[i].Key == key {
			held = &rows[i]
		}
	}
	if held == nil {
		return fail(exitFailure, "%s %q is not held; nothing to release", kind, key)
	}
	what := fmt.Sprintf("%s %q (owner %s, host %s, token %d, expires %s)", kind, key, held.Owner, held.Host, held.Token, held.Expires.Format(time.RFC3339Nano))
	if !force {
		consequence := "its holder's lease ends with ErrLockLost at its next renewal, and a waiter may take the key at once"
		if job {
			consequence = "the next replica to fire runs the job, even if this run is still working"
		}
		return fail(exitUsage, "refusing to release %s without --force: %s", what, consequence)
	}
	var ok bool
	var err error
	if job && g == nil {
		return fail(exitFailure, "this database has no job table")
	}
	// Free the holder shown, not whoever holds the key by now.
	if job {
		ok, err = g.ForceRelease(ctx, key, held.Token, tablelock.Reason(reason))
	} else {
		ok, err = l.ForceRelease(ctx, key, held.Token, tablelock.Reason(reason))
	}
	switch {
	case errors.Is(err, sqllock.ErrNotHeld):
		return fail(exitFailure, "%s %q changed hands since it was shown (token %d): %v", kind, key, held.Token, err)
	case err != nil:
		return err
	case !ok:
		return fail(exitFailure, "%s %q was released before the force release reached it", kind, key)
	}
	fmt.Fprintf(e.stdout, "released %s; recorded in the audit trail (sqllock locks --audit)\n", what)
	return nil
}

// auditRow is one line of `sqllock locks --audit`.
type auditRow struct {
	ID       int64     `json:"id"`
	At       time.Time `json:"at"`
	Action   string    `json:"action"`
	Table    string    `json:"table"`
	Key      string    `json:"key"`
	Token    int64     `json:"token"`
	Owner    string    `json:"owner"`
	Host     string    `json:"host"`
	Holds    int       `json:"holds"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
}

// printAudit lists the audit trail, oldest first.
func printAudit(ctx context.Context, e env, t target, db *sql.DB, asJSON bool) error {
	entries, err := tablelock.AuditLog(ctx, db)
	if err != nil {
		return err
	}
	rows := make([]auditRow, len(entries))
	for i, a := range entries {
		rows[i] = auditRow(a)
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
	fmt.Fprintln(tw, "AT\tACTION\tTABLE\tKEY\tTOKEN\tOWNER\tHOST\tOPERATOR\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.At.Format(time.RFC3339Nano), r.Action, r.Table, r.Key, r.Token, r.Owner, r.Host, r.Operator, r.Reason)
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
		l, err := tablelock.New(db, t.dialect, tablelock.WithTTL(*ttl))
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
