package main

import (
	"context"
	"database/sql"
	"fmt"
	"path"
	"text/tabwriter"

	"github.com/pressly/goose/v3"

	"github.com/sqllock/sqllock/migrations"
)

func cmdMigrate(ctx context.Context, args []string, e env) error {
	var df dbFlags
	fs := newFlags("migrate", e, &df)
	all := fs.Bool("all", false, "down: roll back every sqllock migration (drops the lock tables and the fencing sequence)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fail(exitUsage, "migrate needs one of up, down, status")
	}
	verb := pos[0]
	if verb != "up" && verb != "down" && verb != "status" {
		return fail(exitUsage, "migrate: unknown action %q: want up, down or status", verb)
	}
	return withDB(ctx, df, anySchema, func(t target, db *sql.DB) error {
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
				fmt.Fprintf(e.stdout, "rolled back %s (%v)\n", path.Base(r.Source.Path), r.Duration.Round(1e6))
			}
			if err != nil {
				return fmt.Errorf("migrate down on %s: %v", t.display, err)
			}
			if len(res) == 0 {
				fmt.Fprintf(e.stdout, "%s: nothing to roll back\n", t.display)
			}
			return nil
		}
		return migrateStatus(ctx, e, t, db, p)
	})
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
