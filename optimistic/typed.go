package optimistic

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/sqllock/sqllock"
)

// Load reads the row of t whose key is id into a T, a struct whose fields
// map to columns as sqlx maps them: the `db` tag, or else the field name in
// lower case; `db:"-"` skips a field and embedded structs are flattened. T
// must have fields for the key and the version column. A missing row is an
// error matching [database/sql.ErrNoRows].
func Load[T any](ctx context.Context, db Querier, t *Table, id any) (T, error) {
	var v T
	m, err := mappingOf[T](t)
	if err != nil {
		return v, fmt.Errorf("optimistic: load %s %v: %w", t.name, id, err)
	}
	q, _ := t.selects.Load(m.typ)
	if q == nil {
		cols := make([]string, len(m.fields))
		for i, f := range m.fields {
			cols[i] = f.quoted
		}
		q = "SELECT " + strings.Join(cols, ", ") + " FROM " + t.qName + " WHERE " + t.qID + " = " + t.ph(1)
		t.selects.Store(m.typ, q)
	}
	rv := reflect.ValueOf(&v).Elem()
	dest := make([]any, len(m.fields))
	for i, f := range m.fields {
		dest[i] = rv.FieldByIndex(f.index).Addr().Interface()
	}
	if err := t.stmts.queryRow(ctx, db, q.(string), id).Scan(dest...); err != nil {
		var zero T
		return zero, fmt.Errorf("optimistic: load %s %v: %w", t.name, id, err)
	}
	return v, nil
}

// Store writes every mapped column of *v except the key back to its row,
// only if the row's version still equals v's version field, and then sets
// that field to the new version. A moved version is an error matching
// sqllock.ErrConflict, and *v is left as it was.
func Store[T any](ctx context.Context, db Execer, t *Table, v *T) error {
	m, err := mappingOf[T](t)
	if err != nil {
		return fmt.Errorf("optimistic: store %s: %w", t.name, err)
	}
	if v == nil {
		return fmt.Errorf("optimistic: store %s: %w: nil value", t.name, sqllock.ErrInvalidOption)
	}
	rv := reflect.ValueOf(v).Elem()
	id := rv.FieldByIndex(m.fields[m.id].index).Interface()
	verField := rv.FieldByIndex(m.fields[m.ver].index)
	version := verField.Int()
	sets := make([]Set, 0, len(m.fields)-2)
	for i, f := range m.fields {
		if i != m.id && i != m.ver {
			sets = append(sets, Set{Column: f.column, Value: rv.FieldByIndex(f.index).Interface()})
		}
	}
	next, err := t.Update(ctx, db, id, version, sets...)
	if err != nil {
		return err
	}
	verField.SetInt(next)
	return nil
}

// Modify is read, change, compare-and-swap, retried on conflict: it loads
// the row whose key is id, lets fn change it, and stores it with the
// version check, starting again from a fresh read when another writer got
// there first. An error from fn ends Modify at once with that error (fn
// need not wrap it with Stop), and nothing is written. It returns the row as
// stored. A nil p means DefaultPolicy.
//
// Pass a *sql.DB (or a *sqlx.DB): each attempt then reads the latest
// committed row, and callers of one process on one row queue up instead of
// racing (see WithLocalQueue). Inside a REPEATABLE READ or SERIALIZABLE transaction every
// retry would read the same snapshot and conflict again.
func Modify[T any](ctx context.Context, db Querier, t *Table, id any, p Policy, fn func(*T) error) (T, error) {
	var out T
	if fn == nil {
		return out, fmt.Errorf("optimistic: modify %s %v: %w: nil function", t.name, id, sqllock.ErrInvalidOption)
	}
	if _, err := mappingOf[T](t); err != nil {
		return out, fmt.Errorf("optimistic: modify %s %v: %w", t.name, id, err)
	}
	gate := t.gate(db, id)
	err := Retry(ctx, p, func(ctx context.Context) error {
		if gate != nil {
			select {
			case gate <- struct{}{}:
				defer func() { <-gate }()
			case <-ctx.Done():
				return Stop(ctx.Err())
			}
		}
		v, err := Load[T](ctx, db, t, id)
		if err != nil {
			return Stop(err)
		}
		if err := fn(&v); err != nil {
			return Stop(err)
		}
		if err := Store(ctx, db, t, &v); err != nil {
			if errors.Is(err, sqllock.ErrConflict) {
				return err
			}
			return Stop(err)
		}
		out = v
		return nil
	})
	return out, err
}

// mapping lists the columns of a struct type, in field order.
type mapping struct {
	typ     reflect.Type
	fields  []field
	id, ver int // indexes into fields
}

type field struct {
	column, quoted string
	index          []int
}

func mappingOf[T any](t *Table) (*mapping, error) {
	typ := reflect.TypeFor[T]()
	if m, ok := t.mappings.Load(typ); ok {
		if err, isErr := m.(error); isErr {
			return nil, err
		}
		return m.(*mapping), nil
	}
	m, err := buildMapping(typ, t)
	if err != nil {
		t.mappings.Store(typ, err)
		return nil, err
	}
	t.mappings.Store(typ, m)
	return m, nil
}

func buildMapping(typ reflect.Type, t *Table) (*mapping, error) {
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %v is not a struct", sqllock.ErrInvalidOption, typ)
	}
	m := &mapping{typ: typ, id: -1, ver: -1}
	seen := map[string]bool{}
	var walk func(reflect.Type, []int) error
	walk = func(st reflect.Type, prefix []int) error {
		for i := range st.NumField() {
			sf := st.Field(i)
			index := append(append([]int(nil), prefix...), i)
			tag, _, _ := strings.Cut(sf.Tag.Get("db"), ",")
			if tag == "-" {
				continue
			}
			if sf.Anonymous && tag == "" && sf.Type.Kind() == reflect.Struct {
				if err := walk(sf.Type, index); err != nil {
					return err
				}
				continue
			}
			if !sf.IsExported() {
				continue
			}
			col := tag
			if col == "" {
				col = strings.ToLower(sf.Name)
			}
			lc := strings.ToLower(col)
			if seen[lc] {
				return fmt.Errorf("%w: %v maps column %q twice", sqllock.ErrInvalidOption, typ, col)
			}
			seen[lc] = true
			q, err := quoteColumn(t.d, col)
			if err != nil {
				return fmt.Errorf("%v field %s: %w", typ, sf.Name, err)
			}
			switch lc {
			case strings.ToLower(t.id):
				m.id = len(m.fields)
			case strings.ToLower(t.version):
				switch sf.Type.Kind() {
				case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				default:
					return fmt.Errorf("%w: %v field %s for version column %q must be a signed integer, not %v", sqllock.ErrInvalidOption, typ, sf.Name, t.version, sf.Type)
				}
				m.ver = len(m.fields)
			}
			m.fields = append(m.fields, field{column: col, quoted: q, index: index})
		}
		return nil
	}
	if err := walk(typ, nil); err != nil {
		return nil, err
	}
	if m.id < 0 {
		return nil, fmt.Errorf("%w: %v has no field for key column %q", sqllock.ErrInvalidOption, typ, t.id)
	}
	if m.ver < 0 {
		return nil, fmt.Errorf("%w: %v has no field for version column %q", sqllock.ErrInvalidOption, typ, t.version)
	}
	if len(m.fields) < 3 {
		return nil, fmt.Errorf("%w: %v maps only the key and version columns: nothing to update", sqllock.ErrInvalidOption, typ)
	}
	return m, nil
}
