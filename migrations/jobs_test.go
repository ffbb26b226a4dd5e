package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
)

// TestJobsMigrationKeepsRows: on a database migrated by an earlier
// release, 00007 gives sqllock_jobs the lock table's shape and keeps every
// job row with its token, its runner and its expiry: a run still holding
// its job (one hold) and one released but kept for its hold-at-least (no
// hold) both keep the job from another replica. Its Down gives the old
// columns back, rows intact.
func TestJobsMigrationKeepsRows(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			db := testdb.Scratch(t, d)
			p, err := migrations.NewProvider(db.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 6); err != nil {
				t.Fatal(err)
			}
			now := map[sqllock.Dialect]string{
				sqllock.Postgres: "now()",
				sqllock.MariaDB:  "UTC_TIMESTAMP(6)", sqllock.MySQL: "UTC_TIMESTAMP(6)",
				sqllock.SQLite: "CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
			}[d]
			later := now + map[sqllock.Dialect]string{
				sqllock.Postgres: " + interval '1 hour'",
				sqllock.MariaDB:  " + INTERVAL 1 HOUR", sqllock.MySQL: " + INTERVAL 1 HOUR",
				sqllock.SQLite: " + 3600000000",
			}[d]
			insert := rebind(d, "INSERT INTO sqllock_jobs (name, owner, locked_by, token, locked_at, locked_until) VALUES (?, ?, ?, ?, "+now+", "+later+")")
			type job struct {
				name, owner, host string
				token             int64
			}
			jobs := []job{{"done", "", "host-b/2", 12}, {"running", "run-7f", "host-a/1", 11}}
			for _, j := range jobs {
				if _, err := db.ExecContext(ctx, insert, j.name, j.owner, j.host, j.token); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.UpTo(ctx, 7); err != nil {
				t.Fatal(err)
			}

			if d == sqllock.MySQL {
				// The MySQL path's tokens come from 00010's function;
				// DownTo(6) below rolls it back too.
				if _, err := p.UpTo(ctx, 10); err != nil {
					t.Fatal(err)
				}
			}
			g, err := jobguard.New(db.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			infos, err := g.List(ctx)
			if err != nil {
				t.Fatalf("List on the migrated table: %v", err)
			}
			var got []string
			for _, in := range infos {
				got = append(got, fmt.Sprintf("%s %q %s holds=%d token=%d", in.Key, in.Owner, in.Host, in.Holds, in.Token))
			}
			want := []string{`done "" host-b/2 holds=0 token=12`, `running "run-7f" host-a/1 holds=1 token=11`}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("jobs after 00007:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// Taking a job needs today's statements, hence every migration.
			if _, err := p.Up(ctx); err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				lease, err := g.TryAcquire(ctx, jobguard.Job{Name: j.name, AtMost: time.Minute})
				if !errors.Is(err, sqllock.ErrNotAcquired) {
					if lease != nil {
						_ = lease.Release(ctx)
					}
					t.Errorf("job %q, held for an hour before 00007, taken after it: %v", j.name, err)
				}
			}

			if _, err := p.DownTo(ctx, 6); err != nil {
				t.Fatal(err)
			}
			rows, err := db.QueryContext(ctx, "SELECT name, owner, locked_by, token FROM sqllock_jobs ORDER BY name")
			if err != nil {
				t.Fatalf("old columns after 00007 down: %v", err)
			}
			defer rows.Close()
			var back []job
			for rows.Next() {
				var j job
				if err := rows.Scan(&j.name, &j.owner, &j.host, &j.token); err != nil {
					t.Fatal(err)
				}
				back = append(back, j)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(back) != fmt.Sprint(jobs) {
				t.Fatalf("jobs after 00007 down: %v, want %v", back, jobs)
			}
		})
	}
}
