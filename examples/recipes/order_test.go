package recipes_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/pgxq"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

var errOutOfStock = errors.New("out of stock")

// sellOrder sells an order of several items (sku: quantity) in one
// transaction. LockRows locks the items' rows in one statement, in key
// order, so orders that share items queue instead of deadlocking; the
// stock is checked and decremented in the same transaction, so the order
// needs no lock table and no fence: the row locks and the writes commit,
// or vanish, together.
func sellOrder(ctx context.Context, db *sql.DB, d sqllock.Dialect, order map[string]int) error {
	skus := slices.Sorted(maps.Keys(order))
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	n, err := rowlock.LockRows(ctx, tx, d, "stock", "sku", skus...)
	if err != nil {
		return err
	}
	if n != len(skus) {
		return fmt.Errorf("%d of the order's %d items are not in stock at all", len(skus)-n, len(skus))
	}
	for _, sku := range skus {
		res, err := tx.ExecContext(ctx, bind(d, "UPDATE stock SET qty = qty - ? WHERE sku = ? AND qty >= ?"), order[sku], sku, order[sku])
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(fmt.Errorf("%s: %w", sku, errOutOfStock), err)
		}
	}
	return tx.Commit()
}

// sellOrderSqlx is sellOrder with sqlx: a *sqlx.Tx is a sqllock.Querier
// as it is, and Rebind writes the placeholders.
func sellOrderSqlx(ctx context.Context, db *sqlx.DB, d sqllock.Dialect, order map[string]int) error {
	skus := slices.Sorted(maps.Keys(order))
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	n, err := rowlock.LockRows(ctx, tx, d, "stock", "sku", skus...)
	if err != nil {
		return err
	}
	if n != len(skus) {
		return fmt.Errorf("%d of the order's %d items are not in stock at all", len(skus)-n, len(skus))
	}
	for _, sku := range skus {
		res, err := tx.ExecContext(ctx, tx.Rebind("UPDATE stock SET qty = qty - ? WHERE sku = ? AND qty >= ?"), order[sku], sku, order[sku])
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(fmt.Errorf("%s: %w", sku, errOutOfStock), err)
		}
	}
	return tx.Commit()
}

// sellOrderPgx is sellOrder on a pgx pool, in a pgx transaction: pgxq
// hands the transaction to LockRows.
func sellOrderPgx(ctx context.Context, pool *pgxpool.Pool, order map[string]int) error {
	skus := slices.Sorted(maps.Keys(order))
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := pgxq.New(tx) // a sqllock.Querier on the pgx transaction
		defer q.Close()
		n, err := rowlock.LockRows(ctx, q, sqllock.Postgres, "stock", "sku", skus...)
		if err != nil {
			return err
		}
		if n != len(skus) {
			return fmt.Errorf("%d of the order's %d items are not in stock at all", len(skus)-n, len(skus))
		}
		for _, sku := range skus {
			tag, err := tx.Exec(ctx, "UPDATE stock SET qty = qty - $1 WHERE sku = $2 AND qty >= $1", order[sku], sku)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("%s: %w", sku, errOutOfStock)
			}
		}
		return nil // BeginFunc commits
	})
}

// reserveOrder reserves an order's items at a warehouse that the order's
// transaction does not reach (another database, a service): tablelock
// holds the items' keys together, taken by DoAll in key order, and every
// write at the warehouse is fenced per item, with the item's key as the
// fence resource, so a holder paused past its lease cannot overwrite the
// next holder's reservation. f's table lives in the warehouse's database.
func reserveOrder(ctx context.Context, locker *tablelock.Locker, warehouse *sql.DB, d sqllock.Dialect, f *fence.Fence, order map[string]int) error {
	var keys []string
	for sku := range order {
		keys = append(keys, "stock/"+sku)
	}
	return sqllock.DoAll(ctx, locker, keys, func(ctx context.Context) error {
		for sku, qty := range order {
			// Guard checks the set's token (from ctx) for this item.
			err := f.Write(ctx, warehouse, "stock/"+sku, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, bind(d, "UPDATE reservations SET reserved = reserved + ? WHERE sku = ?"), qty, sku)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

const (
	items      = 6
	startQty   = 40
	buyers     = 8
	perBuyer   = 25
	maxPerItem = 3
)

// randomOrder is 1 to 4 distinct items of 1 to maxPerItem each.
func randomOrder(rng *rand.Rand) map[string]int {
	order := map[string]int{}
	for range 1 + rng.IntN(4) {
		order[fmt.Sprintf("sku-%d", 1+rng.IntN(items))] = 1 + rng.IntN(maxPerItem)
	}
	return order
}

// stockTable creates the stock the orders sell from.
func stockTable(t *testing.T, db *testdb.DB) {
	exec(t, db, "DROP TABLE IF EXISTS stock", "CREATE TABLE stock (sku varchar(32) NOT NULL PRIMARY KEY, qty integer NOT NULL)")
	for i := 1; i <= items; i++ {
		exec(t, db, fmt.Sprintf("INSERT INTO stock (sku, qty) VALUES ('sku-%d', %d)", i, startQty))
	}
	t.Cleanup(func() { db.Exec("DROP TABLE stock") })
}

// TestSellOrder: buyers place overlapping multi-item orders at once
// through each flavour of the LockRows recipe. No order deadlocks, none
// oversells, and the stock left is exactly what the successful orders did
// not take.
func TestSellOrder(t *testing.T) {
	type flavour struct {
		name string
		sell func(t *testing.T, db *testdb.DB) func(ctx context.Context, order map[string]int) error
	}
	flavours := []flavour{
		{"database/sql", func(t *testing.T, db *testdb.DB) func(context.Context, map[string]int) error {
			return func(ctx context.Context, o map[string]int) error { return sellOrder(ctx, db.DB, db.Dialect, o) }
		}},
		{"sqlx", func(t *testing.T, db *testdb.DB) func(context.Context, map[string]int) error {
			dbx := sqlx.NewDb(db.DB, db.Driver)
			return func(ctx context.Context, o map[string]int) error { return sellOrderSqlx(ctx, dbx, db.Dialect, o) }
		}},
		{"pgx", func(t *testing.T, db *testdb.DB) func(context.Context, map[string]int) error {
			pool, err := pgxpool.New(context.Background(), db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return func(ctx context.Context, o map[string]int) error { return sellOrderPgx(ctx, pool, o) }
		}},
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		for _, fl := range flavours {
			if fl.name == "pgx" && d != sqllock.Postgres {
				continue
			}
			t.Run(d.String()+"/"+fl.name, func(t *testing.T) {
				db := testdb.Open(t, d)
				stockTable(t, db)
				sell := fl.sell(t, db)
				ctx := ctxT(t)
				var mu sync.Mutex
				sold := map[string]int{}
				ok, short := 0, 0
				var wg sync.WaitGroup
				for b := range buyers {
					rng := rand.New(rand.NewPCG(uint64(b), 18))
					wg.Go(func() {
						for range perBuyer {
							order := randomOrder(rng)
							err := sell(ctx, order)
							mu.Lock()
							switch {
							case err == nil:
								ok++
								for sku, n := range order {
									sold[sku] += n
								}
							case errors.Is(err, errOutOfStock):
								short++
							default:
								t.Errorf("order %v: %v", order, err)
							}
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				t.Logf("%d orders sold, %d refused for lack of stock", ok, short)
				for i := 1; i <= items; i++ {
					sku := fmt.Sprintf("sku-%d", i)
					var qty int
					if err := db.QueryRowContext(ctx, bind(d, "SELECT qty FROM stock WHERE sku = ?"), sku).Scan(&qty); err != nil {
						t.Fatal(err)
					}
					if qty < 0 || qty != startQty-sold[sku] {
						t.Errorf("%s: %d left, want %d (%d sold)", sku, qty, startQty-sold[sku], sold[sku])
					}
				}
			})
		}
	}
}

// TestReserveOrder: overlapping orders reserve at the warehouse under
// tablelock's AcquireAll, with a fence per item, on every dialect. Every
// reservation of every order is counted once.
func TestReserveOrder(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			ctx := ctxT(t)
			// The warehouse: here a table of the same database, with the
			// fence table the migrations made.
			if err := migrations.Up(ctx, db.DB, d); err != nil {
				t.Fatal(err)
			}
			exec(t, db, "DROP TABLE IF EXISTS reservations", "CREATE TABLE reservations (sku varchar(32) NOT NULL PRIMARY KEY, reserved integer NOT NULL)")
			t.Cleanup(func() { db.Exec("DROP TABLE reservations") })
			for i := 1; i <= items; i++ {
				exec(t, db, fmt.Sprintf("INSERT INTO reservations (sku, reserved) VALUES ('sku-%d', 0)", i))
			}
			f, err := fence.New(d)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			want := map[string]int{}
			var wg sync.WaitGroup
			for b := range buyers {
				locker, err := tablelock.New(db.DB, d) // one Locker per buyer, as per process
				if err != nil {
					t.Fatal(err)
				}
				defer locker.Close()
				rng := rand.New(rand.NewPCG(uint64(b), 18))
				wg.Go(func() {
					for range perBuyer / 2 {
						order := randomOrder(rng)
						if err := reserveOrder(ctx, locker, db.DB, d, f, order); err != nil {
							t.Errorf("order %v: %v", order, err)
							continue
						}
						mu.Lock()
						for sku, n := range order {
							want[sku] += n
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for i := 1; i <= items; i++ {
				sku := fmt.Sprintf("sku-%d", i)
				var got int
				if err := db.QueryRowContext(ctx, bind(d, "SELECT reserved FROM reservations WHERE sku = ?"), sku).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != want[sku] {
					t.Errorf("%s: %d reserved, want %d", sku, got, want[sku])
				}
			}
		})
	}
}
