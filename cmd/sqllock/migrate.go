package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/pressly/goose/v3"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
)

func cmdMigrate(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("migrate", e, &df)
	all := fs.Bool("all", false, "down: roll back every sqllock migration (drops the lock tables and the fencing sequence)")
	force := fs.Bool("force", false, "down: really roll back; without it, down says what it would drop and changes nothing")
	only := fs.String("dialect", "", "export: only this dialect's folder (postgres, mysql or sqlite; default all three)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) >= 1 && pos[0] == "export" {
		if len(pos) != 2 {
			return fail(exitUsage, "usage: sqllock migrate export DIR [--dialect D]")
		}
		return exportMigrations(e, pos[1], *only)
	}
	if len(pos) != 1 {
		return fail(exitUsage, "migrate needs one of up, down, status, export")
	}
	verb := pos[0]
	if verb != "up" && verb != "down" && verb != "status" {
		return fail(exitUsage, "migrate: unknown action %q: want up, down, status or export", verb)
	}
	return withDB(ctx, df, anySchema, func(t target, db *sql.DB) error {
		if t.pooler && verb != "status" {
			return fail(exitUnsupported, "migrate %s through a transaction pooler (%s=transaction): goose holds a session-level lock while it migrates, which the pooler would leave on a server session other clients get; migrate with a --dsn that reaches the server itself", verb, poolerParam)
		}
		p, err := migrations.NewProvider(db, t.dialect)
		if err != nil {
			return err
		}
		switch verb {
		case "up":
			res, err := p.Up(ctx)
			for _, r := range res {
				fmt.Fprintf(e.stdout, "applied %s (%v)\n", path.Base(r.Source.Path), r.Duration.Round(1e6))
			}
			if err != nil {
				return fmt.Errorf("migrate up on %s: %v", t.display, err)
			}
			if len(res) == 0 {
				fmt.Fprintf(e.stdout, "%s is up to date\n", t.display)
			} else {
				fmt.Fprintf(e.stdout, "%s is up to date (%d applied)\n", t.display, len(res))
			}
			return nil
		case "down":
			exists, err := versionTableExists(ctx, db, t.dialect)
			if err != nil {
				return err
			}
			if !exists {
				fmt.Fprintf(e.stdout, "%s has no sqllock migrations applied; nothing to roll back\n", t.display)
				return nil
			}
			plan, err := downPlan(ctx, p, *all)
			if err != nil {
				return fmt.Errorf("migrate down on %s: %v", t.display, err)
			}
			if len(plan) == 0 {
				fmt.Fprintf(e.stdout, "%s: nothing to roll back\n", t.display)
				return nil
			}
			drops, err := describeDown(t.dialect, plan)
			if err != nil {
				return err
			}
			if !*force {
				cmd := "migrate down"
				if *all {
					cmd += " --all"
				}
				return fail(exitUsage, "%s on %s would roll back %s and %s; run it again with --force to go ahead",
					cmd, t.display, listOf(migrationNames(plan)), drops)
			}
			var res []*goose.MigrationResult
			if *all {
				res, err = p.DownTo(ctx, 0)
			} else {
				var r *goose.MigrationResult
				if r, err = p.Down(ctx); r != nil {
					res = append(res, r)
				}
			}
			for _, r := range res {
				drops, changes, _ := downObjects(t.dialect, path.Base(r.Source.Path))
				var did []string
				if len(drops) > 0 {
					did = append(did, "dropped "+listOf(drops))
				}
				if len(changes) > 0 {
					did = append(did, "changed "+listOf(changes))
				}
				fmt.Fprintf(e.stdout, "rolled back %s (%v): %s\n", path.Base(r.Source.Path), r.Duration.Round(1e6), strings.Join(did, ", "))
			}
			if err != nil {
				return fmt.Errorf("migrate down on %s: %v", t.display, err)
			}
			return nil
		}
		return migrateStatus(ctx, e, t, db, p)
	})
}

// exportMigrations writes the embedded migrations to dir/<dialect>/, for
// the goose command line or another migration tool, from a binary that has
// no source tree beside it. It touches no database, and refuses to
// overwrite a file that differs from the embedded one.
func exportMigrations(e env, dir, only string) error {
	dialects := []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite}
	if only != "" {
		d, err := sqllock.ParseDialect(only)
		if err != nil {
			return fail(exitUsage, "migrate export: %v", err)
		}
		dialects = []sqllock.Dialect{d}
	}
	for _, d := range dialects {
		sub, err := migrations.Dir(d)
		if err != nil {
			return err
		}
		entries, err := fs.ReadDir(migrations.FS, sub)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, sub)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("migrate export: %v", err)
		}
		for _, ent := range entries {
			b, err := fs.ReadFile(migrations.FS, path.Join(sub, ent.Name()))
			if err != nil {
				return err
			}
			target := filepath.Join(out, ent.Name())
			if old, err := os.ReadFile(target); err == nil && !bytes.Equal(old, b) {
				return fail(exitFailure, "migrate export: %s exists and differs from the embedded migration; not overwritten", target)
			}
			if err := os.WriteFile(target, b, 0o644); err != nil {
				return fmt.Errorf("migrate export: %v", err)
			}
		}
		fmt.Fprintf(e.stdout, "wrote %d migrations to %s  (goose -dir %s -table %s %s \"$DSN\" up)\n",
			len(entries), out, out, migrations.VersionTable, map[sqllock.Dialect]string{sqllock.Postgres: "postgres", sqllock.MariaDB: "mysql", sqllock.MySQL: "mysql", sqllock.SQLite: "sqlite3"}[d])
	}
	return nil
}

// migrateStatus lists the migrations and their state. On a database never
// migrated it reads nothing but the embedded files: goose's own status would
// create the version table.
func migrateStatus(ctx context.Context, e env, t target, db *sql.DB, p *goose.Provider) error {
	exists, err := versionTableExists(ctx, db, t.dialect)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(e.stdout, "migrations of %s:\n", t.display)
	fmt.Fprintln(tw, "version\tfile\tstate\tapplied at")
	pending := 0
	if !exists {
		for _, s := range p.ListSources() {
			fmt.Fprintf(tw, "%d\t%s\tpending\t-\n", s.Version, path.Base(s.Path))
			pending++
		}
	} else {
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status on %s: %v", t.display, err)
		}
		for _, s := range st {
			applied := "-"
			if s.State == goose.StateApplied {
				applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			} else {
				pending++
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, path.Base(s.Source.Path), s.State, applied)
		}
	}
	tw.Flush()
	if pending > 0 {
		fmt.Fprintf(e.stdout, "%d pending: run `sqllock migrate up`\n", pending)
	} else {
		fmt.Fprintln(e.stdout, "up to date")
	}
	return nil
}

// downPlan lists the migrations migrate down would roll back, newest
// first: the newest applied one, or with all every applied one.
func downPlan(ctx context.Context, p *goose.Provider, all bool) ([]*goose.Source, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return nil, err
	}
	var plan []*goose.Source
	for i := len(st) - 1; i >= 0; i-- {
		if st[i].State != goose.StateApplied {
			continue
		}
		plan = append(plan, st[i].Source)
		if !all {
			break
		}
	}
	return plan, nil
}

func migrationNames(plan []*goose.Source) []string {
	var names []string
	for _, s := range plan {
		names = append(names, path.Base(s.Path))
	}
	return names
}

// dropCosts says what losing each of sqllock's objects costs, for the
// message of migrate down.
var dropCosts = []struct{ object, cost string }{
	{"sqllock_fence_tokens", "every resource's highest accepted fencing token is forgotten, so after migrate up a stale holder's writes are accepted again"},
	{"sqllock_fence_seq", "fencing tokens restart at 1, below tokens already handed out"},
	{"sqllock_fence", "fencing tokens restart at 1, below tokens already handed out"},
	{"sqllock_tickets", "the MySQL path's fencing tokens restart at 1, below tokens already handed out"},
	{"sqllock_next_token", "no fencing token, and so no lock, can be drawn until migrate up"},
	{"sqllock_locks", "held locks are forgotten while their holders still run"},
	{"sqllock_rows", "rowlock's lock rows go"},
	{"sqllock_versions", "the optimistic Locker's versions go"},
	{"sqllock_jobs", "jobguard forgets which periods ran, so a job may run again in one"},
}

// describeDown says what rolling back plan drops and changes, read from
// the migrations' own Down sections, and what that costs: "drop table a
// and sequence b, and change table c: <costs>".
func describeDown(d sqllock.Dialect, plan []*goose.Source) (string, error) {
	var drops, changes, costs []string
	for _, s := range plan {
		dr, ch, err := downObjects(d, path.Base(s.Path))
		if err != nil {
			return "", err
		}
		drops = append(drops, dr...)
		for _, c := range ch {
			if !slices.Contains(changes, c) {
				changes = append(changes, c)
			}
		}
	}
	for _, c := range dropCosts {
		for _, o := range drops {
			if strings.HasSuffix(o, " "+c.object) && !slices.Contains(costs, c.cost) {
				costs = append(costs, c.cost)
			}
		}
	}
	var what []string
	if len(drops) > 0 {
		what = append(what, "drop "+listOf(drops))
	}
	if len(changes) > 0 {
		what = append(what, "change "+listOf(changes))
	}
	out := strings.Join(what, ", and ")
	if len(costs) > 0 {
		out += ": " + strings.Join(costs, "; ")
	}
	return out, nil
}

// downStatement, alterStatement, redefineStatement and rowsStatement are
// the kinds of statement sqllock's Down sections hold. A function dropped
// and created again in one Down (MySQL has no CREATE OR REPLACE FUNCTION)
// is a change, not a drop. A statement none of them reads (a DO block
// that alters every table of a shape) says what it changes on a comment
// line of its own: "-- describe: <what it changes>".
var (
	downStatement     = regexp.MustCompile(`(?is)^DROP\s+(TABLE|SEQUENCE|INDEX|FUNCTION|TYPE|TRIGGER)\s+(?:IF\s+EXISTS\s+)?([A-Za-z0-9_.]+)(?:\s*\([^)]*\))?$`)
	alterStatement    = regexp.MustCompile(`(?is)^(?:ALTER\s+TABLE|CREATE\s+INDEX\s+[A-Za-z0-9_]+\s+ON)\s+([A-Za-z0-9_.]+)\s`)
	redefineStatement = regexp.MustCompile(`(?is)^(?:ALTER\s+(SEQUENCE)|CREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION))\s+([A-Za-z0-9_.]+)[\s(]`)
	rowsStatement     = regexp.MustCompile(`(?is)^(?:INSERT\s+INTO|DELETE\s+FROM)\s+([A-Za-z0-9_.]+)(?:[\s(]|$)`)
)

// downObjects reads the Down section of migration file name and returns
// what it drops, as "table x", "sequence y" and "index z", and the tables
// it alters or indexes (keeping their rows). A statement of another kind is an error: migrate
// down could not say what it does.
func downObjects(d sqllock.Dialect, name string) (drops, changes []string, err error) {
	dir, err := migrations.Dir(d)
	if err != nil {
		return nil, nil, err
	}
	src, err := migrations.FS.ReadFile(dir + "/" + name)
	if err != nil {
		return nil, nil, err
	}
	_, down, ok := strings.Cut(string(src), "-- +goose Down")
	if !ok {
		return nil, nil, nil
	}
	for _, stmt := range splitStatements(down) {
		var lines, described []string
		for _, l := range strings.Split(stmt, "\n") {
			l = strings.TrimSpace(l)
			if d, ok := strings.CutPrefix(l, "-- describe:"); ok {
				described = append(described, strings.TrimSpace(d))
			} else if l != "" && !strings.HasPrefix(l, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			continue
		}
		if len(described) > 0 {
			changes = append(changes, described...)
			continue
		}
		text := strings.Join(lines, " ")
		if m := downStatement.FindStringSubmatch(text); m != nil {
			drops = append(drops, strings.ToLower(m[1])+" "+m[2])
			continue
		}
		if m := alterStatement.FindStringSubmatch(text); m != nil {
			changes = append(changes, "table "+m[1])
			continue
		}
		if m := redefineStatement.FindStringSubmatch(text); m != nil {
			changes = append(changes, strings.ToLower(m[1]+m[2])+" "+m[3])
			continue
		}
		if m := rowsStatement.FindStringSubmatch(text); m != nil {
			if c := "table " + m[1]; !slices.Contains(changes, c) {
				changes = append(changes, c)
			}
			continue
		}
		return nil, nil, fmt.Errorf("migration %s: cannot describe its Down statement %q", name, text)
	}
	drops = slices.DeleteFunc(drops, func(o string) bool { return slices.Contains(changes, o) })
	return drops, changes, nil
}

// splitStatements splits SQL at semicolons, keeping a goose
// StatementBegin ... StatementEnd block (a function body) whole.
func splitStatements(src string) []string {
	var out []string
	for {
		before, block, found := strings.Cut(src, "-- +goose StatementBegin")
		out = append(out, strings.Split(before, ";")...)
		if !found {
			return out
		}
		body, rest, _ := strings.Cut(block, "-- +goose StatementEnd")
		out = append(out, body)
		src = rest
	}
}

// listOf joins items as "a, b and c".
func listOf(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
