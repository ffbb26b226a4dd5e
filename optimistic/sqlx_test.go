package optimistic_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// Versioned is embedded by value: its fields are the key and version
// columns, the version one named by the lower-cased field name.
type Versioned struct {
	ID      int64 `db:"id"`
	Version int64
}

// Audit is embedded by pointer: sqlx allocates it when scanning.
type Audit struct {
	UpdatedBy string `db:"updated_by"`
}

// product is mapped the way sqlx maps it: embedded structs flattened, `db`
// tags renaming, other fields lower-cased, `db:"-"` skipped.
type product struct {
	Versioned
	*Audit
	Quantity int64 `db:"qty"`
	Label    string
	Cache    string `db:"-"`
}

// productTable creates (id, qty, version, label, updated_by) holding row 1:
// qty 10, version 1, label 'widget', updated_by 'seed'.
func productTable(t testing.TB, db *testdb.DB) string {
	t.Helper()
	name := uniqueName("opt_sqlx")
	exec(t, db, "CREATE TABLE "+name+" (id integer NOT NULL PRIMARY KEY, qty bigint NOT NULL, version bigint NOT NULL, label varchar(64) NOT NULL, updated_by varchar(64) NOT NULL)")
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+name) })
	exec(t, db, "INSERT INTO "+name+" (id, qty, version, label, updated_by) VALUES (1, 10, 1, 'widget', 'seed')")
	return name
}

// getProduct reads row 1 with sqlx's own Get, for comparison.
func getProduct(t testing.TB, x *sqlx.DB, table string) product {
	t.Helper()
	var p product
	if err := x.GetContext(context.Background(), &p, "SELECT id, qty, version, label, updated_by FROM "+table+" WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSqlx: the typed helpers on *sqlx.DB, *sqlx.Tx and *sqlx.Conn read
// and write a struct exactly as sqlx maps it, and detect a moved version.
func TestSqlx(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		// Not closed: it wraps the shared test database.
		x := sqlx.NewDb(db.DB, db.Driver)
		name := productTable(t, db)
		tb := newTable(t, db, name)

		// Load fills the embedded fields, the pointer one allocated, and
		// agrees with sqlx's Get.
		p, err := optimistic.Load[product](ctx, x, tb, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.ID != 1 || p.Version != 1 || p.Quantity != 10 || p.Label != "widget" || p.Audit == nil || p.UpdatedBy != "seed" {
			t.Fatalf("Load = %+v (audit %+v)", p, p.Audit)
		}
		if want := getProduct(t, x, name); p.Versioned != want.Versioned || *p.Audit != *want.Audit || p.Quantity != want.Quantity || p.Label != want.Label {
			t.Fatalf("Load = %+v, sqlx Get = %+v", p, want)
		}

		// Modify round trip on *sqlx.DB: every mapped column written, the
		// skipped one not read.
		got, err := optimistic.Modify(ctx, x, tb, 1, nil, func(p *product) error {
			if p.Cache != "" {
				t.Errorf("db:\"-\" field read as %q", p.Cache)
			}
			p.Quantity--
			p.Label = "sold one"
			p.UpdatedBy = "sqlx.DB"
			p.Cache = "ignored"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 || got.Quantity != 9 || got.Label != "sold one" || got.UpdatedBy != "sqlx.DB" {
			t.Fatalf("Modify returned %+v", got)
		}
		if row := getProduct(t, x, name); row.Version != 2 || row.Quantity != 9 || row.Label != "sold one" || row.UpdatedBy != "sqlx.DB" {
			t.Fatalf("row after Modify = %+v (audit %+v)", row, row.Audit)
		}

		// A conflict: a writer holding version 2 loses to one that stored
		// first, and keeps its own copy as it was.
		stale, err := optimistic.Load[product](ctx, x, tb, 1)
		if err != nil {
			t.Fatal(err)
		}
		winner := stale
		winner.Audit = &Audit{UpdatedBy: "winner"}
		if err := optimistic.Store(ctx, x, tb, &winner); err != nil || winner.Version != 3 {
			t.Fatalf("Store at the current version = %v, version %d", err, winner.Version)
		}
		stale.Quantity = 0
		if err := optimistic.Store(ctx, x, tb, &stale); !errors.Is(err, sqllock.ErrConflict) || stale.Version != 2 {
			t.Fatalf("stale Store = %v, version %d; want ErrConflict and version 2", err, stale.Version)
		}
		if row := getProduct(t, x, name); row.Version != 3 || row.Quantity != 9 || row.UpdatedBy != "winner" {
			t.Fatalf("row after a lost race = %+v (audit %+v)", row, row.Audit)
		}

		// *sqlx.Tx: a rolled-back Modify leaves the row alone; a stale
		// Store in the transaction conflicts; a committed Modify sticks.
		tx, err := x.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := optimistic.Modify(ctx, tx, tb, 1, optimistic.NoRetry(), func(p *product) error { p.Quantity = 100; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if row := getProduct(t, x, name); row.Version != 3 || row.Quantity != 9 {
			t.Fatalf("row after a rolled-back Modify = %+v", row)
		}
		tx, err = x.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		mine, err := optimistic.Load[product](ctx, tx, tb, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Update(ctx, tx, 1, mine.Version, optimistic.Set{Column: "qty", Value: 8}); err != nil {
			t.Fatal(err)
		}
		if err := optimistic.Store(ctx, tx, tb, &mine); !errors.Is(err, sqllock.ErrConflict) {
			t.Fatalf("stale Store in a *sqlx.Tx = %v, want ErrConflict", err)
		}
		got, err = optimistic.Modify(ctx, tx, tb, 1, optimistic.NoRetry(), func(p *product) error {
			p.Quantity--
			p.UpdatedBy = "sqlx.Tx"
			return nil
		})
		if err != nil || got.Version != 5 || got.Quantity != 7 {
			t.Fatalf("Modify in a *sqlx.Tx = %+v, %v", got, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if row := getProduct(t, x, name); row.Version != 5 || row.Quantity != 7 || row.UpdatedBy != "sqlx.Tx" {
			t.Fatalf("row after a committed Modify = %+v (audit %+v)", row, row.Audit)
		}

		// *sqlx.Conn works the same.
		conn, err := x.Connx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got, err := optimistic.Modify(ctx, conn, tb, 1, nil, func(p *product) error { p.Quantity--; return nil }); err != nil || got.Quantity != 6 || got.Version != 6 {
			t.Fatalf("Modify on *sqlx.Conn = %+v, %v", got, err)
		}
		conn.Close()

		// A *sqlx.DB with its own mapper maps with it, as sqlx would.
		type jsonProduct struct {
			Key     int64  `json:"id"`
			Rev     int64  `json:"version"`
			Count   int64  `json:"qty"`
			Comment string `json:"label"`
		}
		xj := sqlx.NewDb(db.DB, db.Driver)
		xj.Mapper = reflectx.NewMapperFunc("json", strings.ToLower)
		jp, err := optimistic.Modify(ctx, xj, tb, 1, nil, func(p *jsonProduct) error { p.Count--; return nil })
		if err != nil || jp.Key != 1 || jp.Rev != 7 || jp.Count != 5 || jp.Comment != "sold one" {
			t.Fatalf("Modify through a json mapper = %+v, %v", jp, err)
		}

		// Names that differ from the table's in case only: sqlx scans by
		// result column name, which the aliases keep as mapped. (Quoted
		// names are case-sensitive on PostgreSQL.)
		if db.Dialect != sqllock.Postgres {
			type shouting struct {
				ID      int64  `db:"ID"`
				Version int64  `db:"VERSION"`
				Label   string `db:"LABEL"`
			}
			s, err := optimistic.Modify(ctx, x, tb, 1, nil, func(s *shouting) error { s.Label = "quiet"; return nil })
			if err != nil || s.ID != 1 || s.Version != 8 || s.Label != "quiet" {
				t.Fatalf("Modify with upper-case names = %+v, %v", s, err)
			}
		}
	})
}

// TestMappingErrors: structs sqlx's mapping cannot write back, and columns
// the table lacks, are clear errors on every dialect, SQLite included
// (where a double-quoted unknown name would read as a string literal).
func TestMappingErrors(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := productTable(t, db)
		tb := newTable(t, db, name)

		// A tagged embedded struct prefixes its columns ("v.id"), as sqlx
		// does for joins: not a column of one table.
		type tagged struct {
			Versioned `db:"v"`
			Quantity  int64 `db:"qty"`
		}
		if _, err := optimistic.Load[tagged](ctx, db.DB, tb, 1); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), `"v.id"`) {
			t.Errorf("Load of a tagged embedded struct = %v", err)
		}
		type unexported struct{ ID, Version, Qty int64 }
		type hidden struct {
			*unexported
			Label string
		}
		if _, err := optimistic.Load[hidden](ctx, db.DB, tb, 1); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Load through an embedded pointer to an unexported type = %v", err)
		}
		// A nil embedded pointer is refused, not written as zero values.
		var p product
		p.ID, p.Version = 1, 1
		if err := optimistic.Store(ctx, db.DB, tb, &p); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), "updated_by") {
			t.Errorf("Store with a nil embedded *Audit = %v", err)
		}
		// A field for a column the table does not have.
		type extra struct {
			product
			Colour string
		}
		if _, err := optimistic.Load[extra](ctx, db.DB, tb, 1); err == nil || errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), "colour") {
			t.Errorf("Load with a field for a missing column = %v, want the database's error naming it", err)
		}
		// A version column the table does not have: the typed helpers fail
		// too, and write nothing.
		bad, err := optimistic.NewTable(db.Dialect, name, "id", "revision")
		if err != nil {
			t.Fatal(err)
		}
		type revised struct {
			ID       int64 `db:"id"`
			Revision int64
			Qty      int64
		}
		if _, err := optimistic.Modify(ctx, db.DB, bad, 1, optimistic.NoRetry(), func(r *revised) error { r.Qty = 0; return nil }); err == nil || errors.Is(err, sqllock.ErrConflict) || !strings.Contains(err.Error(), "revision") {
			t.Errorf("Modify with a missing version column = %v, want the database's error naming it", err)
		}
		if _, err := bad.Update(ctx, db.DB, 1, 1, optimistic.Set{Column: "qty", Value: 0}); err == nil || errors.Is(err, sqllock.ErrConflict) {
			t.Errorf("Update with a missing version column = %v, want an error that is not a conflict", err)
		}
		if qty, ver := readStock(t, db, name); qty != 10 || ver != 1 {
			t.Fatalf("mapping errors changed the row: qty %d version %d", qty, ver)
		}
	})
}
