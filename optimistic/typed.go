package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
)

// Load reads the row of t whose key is id into a T, a struct mapped to
// columns by sqlx's mapper: the one of db when db is a *sqlx.DB, *sqlx.Tx or
// *sqlx.Conn, else sqlx's default (the `db` tag, or else the field name in
// lower case; `db:"-"` skips a field; embedded structs and pointers to
// structs are flattened). The row is scanned with sqlx's StructScan. T must
// have fields for the key and the version column; every other mapped field
// must be a column of t. A missing row is an error matching
// [database/sql.ErrNoRows].
func Load[T any](ctx context.Context, db sqllock.Querier, t *Table, id any) (T, error) {
	var v T
	m, err := mappingOf[T](t, db)
	if err != nil {
		return v, fmt.Errorf("optimistic: load %s %v: %w", t.name, id, err)
	}
	if err := t.load(ctx, db, m, id, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("optimistic: load %s %v: %w", t.name, id, err)
	}
	return v, nil
}

// Store writes every mapped column of *v except the key back to its row,
// only if the row's version still equals v's version field, and then sets
// that field to the new version. A moved version is an error matching
// sqllock.ErrConflict, and *v is left as it was.
func Store[T any](ctx context.Context, db sqllock.Execer, t *Table, v *T) error {
	m, err := mappingOf[T](t, db)
	if err != nil {
		return fmt.Errorf("optimistic: store %s: %w", t.name, err)
	}
	if v == nil {
		return fmt.Errorf("optimistic: store %s: %w: nil value", t.name, sqllock.ErrInvalidOption)
	}
	return t.store(ctx, db, m, reflect.ValueOf(v).Elem())
}

// Modify is read, change, compare-and-swap, retried on conflict: it loads
// the row whose key is id, lets fn change it, and stores it with the
// version check, starting again from a fresh read when another writer got
// there first. An error from fn ends Modify at once with that error (fn
// need not wrap it with Stop), and nothing is written. It returns the row as
// stored. A nil p means DefaultPolicy. ModifyStats also reports how many
// attempts were made.
//
// Pass a *sql.DB (or a *sqlx.DB): each attempt then reads the latest
// committed row, and callers of one process on one row queue up instead of
// racing (see WithLocalQueue). Transient database errors (deadlocks,
// serialization failures, SQLite busy, a dropped connection) are retried
// there too, under the same policy, except a connection lost during the
// write: the write may have committed with only its reply lost, and running
// fn again would apply the change twice, so that error is returned.
//
// On a transaction, or a pinned connection that may carry one, a transient
// error ends Modify: the server has aborted the transaction (PostgreSQL) or
// rolled it back (a MySQL deadlock), so a retry would fail or run outside
// it; retry the whole transaction instead. Conflicts are still retried there, but inside
// a REPEATABLE READ or SERIALIZABLE transaction every retry would read the
// same snapshot and conflict again.
//
// fn may call Modify on rows of any Table (a transfer between two rows):
// the nested call never waits for a local queue, whose holder could be its
// own caller, or a goroutine waiting for its caller's, and races as a
// writer in another process would. Nested in a Modify of the same row, it
// writes first, so the caller's write conflicts and fn runs again on the
// fresh row: make such a write depend on what fn reads, or fn writes again
// on every attempt until p gives up. fn runs again after any conflict, so
// a nested write repeats with it, and the caller's write may still fail
// after it: for an all-or-nothing transfer, pass both calls one *sql.Tx. A
// Modify that fn starts on another goroutine is not nested: fn must not
// wait for it.
func Modify[T any](ctx context.Context, db sqllock.Querier, t *Table, id any, p Policy, fn func(*T) error) (T, error) {
	v, _, err := ModifyStats(ctx, db, t, id, p, fn)
	return v, err
}

// ModifyStats is Modify, and also reports the attempts it made, on failure
// as well as on success (see Stats). An attempt is one read, one call of fn
// and one write.
func ModifyStats[T any](ctx context.Context, db sqllock.Querier, t *Table, id any, p Policy, fn func(*T) error) (T, Stats, error) {
	var out T
	if fn == nil {
		return out, Stats{}, fmt.Errorf("optimistic: modify %s %v: %w: nil function", t.name, id, sqllock.ErrInvalidOption)
	}
	m, err := mappingOf[T](t, db)
	if err != nil {
		return out, Stats{}, fmt.Errorf("optimistic: modify %s %v: %w", t.name, id, err)
	}
	// Only a pool runs each statement in its own transaction, so only there
	// is a statement that failed transiently safe to run again.
	transientOK := isPoolHandle(db)
	st, err := RetryStats(ctx, p, func(ctx context.Context) error {
		leave, err := t.enterQueue(ctx, db, id)
		if err != nil {
			return Stop(err)
		}
		defer leave()
		var v T
		if err := t.load(ctx, db, m, id, &v); err != nil {
			err = fmt.Errorf("optimistic: load %s %v: %w", t.name, id, err)
			if transientOK && dberr.IsRetryable(err) {
				return err // a read can always be repeated
			}
			return Stop(err)
		}
		if err := callFn(func() error { return fn(&v) }); err != nil {
			return Stop(err)
		}
		if err := t.store(ctx, db, m, reflect.ValueOf(&v).Elem()); err != nil {
			if errors.Is(err, sqllock.ErrConflict) || transientOK && dberr.IsRetryable(err) && !writeInDoubt(err) {
				return err
			}
			return Stop(err)
		}
		out = v
		return nil
	})
	return out, st, err
}

// writeInDoubt reports a connection lost while a write may have reached
// the server.
func writeInDoubt(err error) bool {
	return dberr.IsConnLoss(err) && !dberr.NeverSent(err)
}

// load reads the row into dest, a pointer to m's struct type, with sqlx's
// StructScan. The columns are aliased to their mapped names: SQLite does not
// promise the name of an unaliased result column.
func (t *Table) load(ctx context.Context, db sqllock.Querier, m *mapping, id, dest any) error {
	rows, err := query(ctx, t.stmts.Load(), db, m.query, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	r := &sqlx.Rows{Rows: rows, Mapper: m.mapper}
	if !r.Next() {
		if err := r.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.StructScan(dest); err != nil {
		return err
	}
	return rows.Close()
}

// store writes rv, an addressable struct of m's type, with the version
// check and sets its version field to the new version.
func (t *Table) store(ctx context.Context, db sqllock.Execer, m *mapping, rv reflect.Value) error {
	value := func(c column) (reflect.Value, error) {
		// reflectx.FieldByIndexesReadOnly would panic on a nil embedded
		// pointer, and FieldByIndexes would change *v before the write.
		v := rv
		for _, i := range c.index {
			if v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return v, fmt.Errorf("optimistic: store %s: %w: column %q is in a nil embedded %v", t.name, sqllock.ErrInvalidOption, c.name, v.Type())
				}
				v = v.Elem()
			}
			v = v.Field(i)
		}
		return v, nil
	}
	idv, err := value(m.columns[m.id])
	if err != nil {
		return err
	}
	verv, err := value(m.columns[m.ver])
	if err != nil {
		return err
	}
	sets := make([]Set, 0, len(m.columns)-2)
	for i, c := range m.columns {
		if i == m.id || i == m.ver {
			continue
		}
		v, err := value(c)
		if err != nil {
			return err
		}
		sets = append(sets, Set{Column: c.name, Value: v.Interface()})
	}
	next, err := t.Update(ctx, db, idv.Interface(), verv.Int(), sets...)
	if err != nil {
		return err
	}
	verv.SetInt(next)
	return nil
}

// mapping is a struct type's columns as sqlx's mapper names them, and the
// SELECT that reads them.
type mapping struct {
	mapper  *reflectx.Mapper
	columns []column
	id, ver int // indexes into columns
	query   string
}

type column struct {
	name  string // the mapper's path: the column and its alias
	index []int  // field traversal
}

type mappingKey struct {
	mapper *reflectx.Mapper
	typ    reflect.Type
}

// mapperOf is the mapper sqlx itself would use with db.
func mapperOf(db any) *reflectx.Mapper {
	var m *reflectx.Mapper
	switch x := db.(type) {
	case *sqlx.DB:
		m = x.Mapper
	case *sqlx.Tx:
		m = x.Mapper
	case *sqlx.Conn:
		m = x.Mapper
	}
	if m == nil {
		// sqlx keeps its default mapper (the `db` tag, else
		// sqlx.NameMapper of the field name) unexported; NewDb hands it
		// out and touches no connection.
		m = sqlx.NewDb(nil, "").Mapper
	}
	return m
}

func mappingOf[T any](t *Table, db any) (*mapping, error) {
	k := mappingKey{mapperOf(db), reflect.TypeFor[T]()}
	if m, ok := t.mappings.Load(k); ok {
		if err, isErr := m.(error); isErr {
			return nil, err
		}
		return m.(*mapping), nil
	}
	m, err := buildMapping(k.mapper, k.typ, t)
	if err != nil {
		t.mappings.Store(k, err)
		return nil, err
	}
	t.mappings.Store(k, m)
	return m, nil
}

// buildMapping takes the fields sqlx's mapper would scan a column into:
// every mapped field reached through embedded structs only (a struct-valued
// field such as a time.Time or sql.NullString is one column), the one sqlx
// picks where a name is mapped twice.
func buildMapping(mp *reflectx.Mapper, typ reflect.Type, t *Table) (*mapping, error) {
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %v is not a struct", sqllock.ErrInvalidOption, typ)
	}
	sm := mp.TypeMap(typ)
	m := &mapping{mapper: mp, id: -1, ver: -1}
	seen := map[string]bool{}
	var sel []string
fields:
	for _, fi := range sm.Index {
		ft := reflectx.Deref(fi.Field.Type)
		if sm.Paths[fi.Path] != fi || fi.Embedded && ft.Kind() == reflect.Struct || !fi.Field.IsExported() {
			continue
		}
		for p := fi.Parent; p != nil && p != sm.Tree; p = p.Parent {
			if !p.Embedded {
				continue fields // part of a struct-valued column
			}
			if p.Field.Type.Kind() == reflect.Pointer && !p.Field.IsExported() {
				return nil, fmt.Errorf("%w: %v field %s: a nil embedded pointer to an unexported type cannot be set", sqllock.ErrInvalidOption, typ, p.Field.Name)
			}
		}
		lc := strings.ToLower(fi.Path)
		if seen[lc] {
			return nil, fmt.Errorf("%w: %v maps column %q twice", sqllock.ErrInvalidOption, typ, fi.Path)
		}
		seen[lc] = true
		q, err := quoteColumn(t.st, fi.Path)
		if err != nil {
			return nil, fmt.Errorf("%v field %s: %w", typ, fi.Field.Name, err)
		}
		switch lc {
		case strings.ToLower(t.id):
			m.id = len(m.columns)
		case strings.ToLower(t.version):
			switch fi.Field.Type.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			default:
				return nil, fmt.Errorf("%w: %v field %s for version column %q must be a signed integer, not %v", sqllock.ErrInvalidOption, typ, fi.Field.Name, t.version, fi.Field.Type)
			}
			m.ver = len(m.columns)
		}
		m.columns = append(m.columns, column{name: fi.Path, index: fi.Index})
		sel = append(sel, q+" AS "+q)
	}
	if m.id < 0 {
		return nil, fmt.Errorf("%w: %v has no field for key column %q", sqllock.ErrInvalidOption, typ, t.id)
	}
	if m.ver < 0 {
		return nil, fmt.Errorf("%w: %v has no field for version column %q", sqllock.ErrInvalidOption, typ, t.version)
	}
	if len(m.columns) < 3 {
		return nil, fmt.Errorf("%w: %v maps only the key and version columns: nothing to update", sqllock.ErrInvalidOption, typ)
	}
	m.query = "SELECT " + strings.Join(sel, ", ") + " FROM " + t.qName + " WHERE " + t.qID + " = " + t.ph(1)
	return m, nil
}
