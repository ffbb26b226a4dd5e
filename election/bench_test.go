package election_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// BenchmarkCampaignResign: an uncontended Campaign and Resign, beside the
// same statements by hand (the lease row's take and release, and the
// term's row), in the same run.
func BenchmarkCampaignResign(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			b.Run("sqllock", func(b *testing.B) {
				e, name := newElection(b, db), locktest.Key(b)
				for b.Loop() {
					lead, err := e.Campaign(ctx, name, "v")
					if err != nil {
						b.Fatal(err)
					}
					if err := lead.Resign(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("raw", func(b *testing.B) {
				name := locktest.Key(b)
				insert := map[sqllock.Dialect]string{
					sqllock.Postgres: `INSERT INTO sqllock_elections (name, term, value, since) VALUES ($1, $2, 'v', now())`,
					sqllock.MariaDB:  `INSERT INTO sqllock_elections (name, term, value, since) VALUES (?, ?, 'v', UTC_TIMESTAMP(6))`,
					sqllock.MySQL:    `INSERT INTO sqllock_elections (name, term, value, since) VALUES (?, ?, 'v', UTC_TIMESTAMP(6))`,
					sqllock.SQLite:   `INSERT INTO sqllock_elections (name, term, value, since) VALUES (?1, ?2, 'v', 0)`,
				}[d]
				st, err := db.PrepareContext(ctx, insert)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				locktest.BenchRawTakeFree(b, db.DB, d, tablelock.DefaultTable, election.KeyPrefix+name, func(term int64) {
					if _, err := st.ExecContext(ctx, name, term); err != nil {
						b.Fatal(err)
					}
				})
			})
		})
	}
}

// campaigner serves an election as a Locker, for the handoff benchmark.
type campaigner struct{ e *election.Election }

func (c campaigner) Acquire(ctx context.Context, name string) (sqllock.Lease, error) {
	return c.e.Campaign(ctx, name, "v")
}

func (c campaigner) TryAcquire(context.Context, string) (sqllock.Lease, error) {
	return nil, sqllock.ErrUnsupported // a campaign waits; the benchmark does not try
}

// BenchmarkHandoff: a resignation reaching a campaigner of another
// Election (as in another process); p50 and p99.
func BenchmarkHandoff(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchHandoff(b, campaigner{newElection(b, db)}, campaigner{newElection(b, db)})
		})
	}
}
