package sqllock_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// withOwnerDoc is WithOwner's doc comment, as in owner.go.
func withOwnerDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "owner.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "WithOwner" {
			return strings.Join(strings.Fields(fn.Doc.Text()), " ")
		}
	}
	t.Fatal("no WithOwner in owner.go")
	return ""
}

// TestOwnerReentrancy: WithOwner's doc says, strategy by strategy, whether
// one owner acquires a key it holds again at once (reentrant) or waits as
// anyone else does, and each Locker does what it says: a second TryAcquire
// by the owner gets the key under the same token, or is refused.
func TestOwnerReentrancy(t *testing.T) {
	doc := withOwnerDoc(t)
	strategies := []struct {
		name      string
		reentrant bool
		dialects  []sqllock.Dialect
		new       func(t testing.TB, db *testdb.DB) sqllock.Locker
	}{
		{"tablelock", true, testdb.Dialects, func(t testing.TB, db *testdb.DB) sqllock.Locker { return newTableLocker(t, db) }},
		{"advisory", true, serverDialects(), func(t testing.TB, db *testdb.DB) sqllock.Locker {
			l, err := advisory.New(db.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}},
		{"rowlock", false, serverDialects(), func(t testing.TB, db *testdb.DB) sqllock.Locker {
			l, err := rowlock.New(db.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}},
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			if named, says := saysReentrant(doc, s.name); !named {
				t.Errorf("WithOwner's doc does not say whether %s is reentrant:\n%s", s.name, doc)
			} else if says != s.reentrant {
				t.Errorf("WithOwner's doc says %s is reentrant: %v; it is: %v\n%s", s.name, says, s.reentrant, doc)
			}
			for _, d := range s.dialects {
				t.Run(d.String(), func(t *testing.T) {
					db := testdb.Open(t, d)
					ctx := sqllock.WithOwner(ctxFor(t), "owner-"+s.name)
					key := locktest.Key(t)
					l := s.new(t, db)
					first, err := l.TryAcquire(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					defer first.Release(context.Background())
					again, err := l.TryAcquire(ctx, key)
					switch {
					case s.reentrant && err != nil:
						t.Fatalf("the owner's second TryAcquire: %v, want the key again", err)
					case s.reentrant:
						if again.Token() != first.Token() {
							t.Errorf("the owner's second hold has token %d, want the first's %d", again.Token(), first.Token())
						}
						if err := again.Release(ctx); err != nil {
							t.Fatal(err)
						}
					case err == nil:
						again.Release(context.Background())
						t.Fatal("the owner's second TryAcquire got the key it holds, which the doc says waits")
					case !errors.Is(err, sqllock.ErrNotAcquired):
						t.Fatalf("the owner's second TryAcquire: %v, want ErrNotAcquired", err)
					}
				})
			}
		})
	}
}

// saysReentrant finds the first sentence of doc that names strategy and
// says "reentrant"; reentrant: it does not say "not reentrant".
func saysReentrant(doc, strategy string) (named, reentrant bool) {
	for s := range strings.SplitSeq(doc, ". ") {
		if strings.Contains(s, strategy) && strings.Contains(s, "reentrant") {
			return true, !strings.Contains(s, "not reentrant")
		}
	}
	return false, false
}
