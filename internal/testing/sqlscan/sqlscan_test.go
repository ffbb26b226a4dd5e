package sqlscan

import (
	"slices"
	"testing"
)

func TestMariaDBOnly(t *testing.T) {
	for q, want := range map[string][]string{
		"INSERT INTO t VALUES (NEXTVAL(s)) RETURNING id":                   {"RETURNING", "NEXTVAL"},
		"SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT INTO t ...": {"SET STATEMENT"},
		"SELECT 1 FROM t WHERE k = ? FOR UPDATE WAIT 5":                    {"WAIT <n>"},
		"SELECT 1 FROM t WHERE k = ? FOR UPDATE NOWAIT":                    nil,
		"CREATE SEQUENCE s": {"SEQUENCE"},
		"SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS": {"SESSION_STATUS"},
		"SELECT sqllock_next_token()":                                  nil,
	} {
		if got := MariaDBOnly(q); !slices.Equal(got, want) {
			t.Errorf("MariaDBOnly(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestStrings(t *testing.T) {
	type inner struct{ q string }
	v := struct {
		a string
		p *inner
		s []string
		m map[int]string
		i any
	}{"a", &inner{"b"}, []string{"c", "a"}, map[int]string{1: "d"}, inner{"e"}}
	got := Strings(v)
	slices.Sort(got)
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("Strings = %v, want %v", got, want)
	}
}
