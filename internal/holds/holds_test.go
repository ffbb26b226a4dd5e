package holds

import (
	"testing"

	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// TestDecode: each primitive's row keys are named as its users know them,
// the internal separator never shown; an election's prefix means a
// leader only in the default lock table.
func TestDecode(t *testing.T) {
	lt := tablelock.DefaultTable
	for _, tc := range []struct {
		table, lockTable, key string
		want                  Name
		part                  string
	}{
		{lt, lt, "orders/7", Name{Lock, "orders/7", -1}, ""},
		{lt, lt, election.KeyPrefix + "primary", Name{Leader, "primary", -1}, ""},
		{"other_locks", "other_locks", election.KeyPrefix + "primary", Name{Lock, election.KeyPrefix + "primary", -1}, ""},
		{jobguard.DefaultTable, lt, "reports#3", Name{Job, "reports#3", -1}, ""},
		{semaphore.DefaultTable, lt, "exports#2", Name{Semaphore, "exports", 2}, "permit 2"},
		{semaphore.DefaultTable, lt, "a#b", Name{Semaphore, "a#b", -1}, ""},
		{semaphore.DefaultTable, lt, "cfg" + RWSep + "w", Name{RWLock, "cfg", -1}, "writer"},
		{semaphore.DefaultTable, lt, "cfg" + RWSep + "r3", Name{RWLock, "cfg", 3}, "reader 3"},
	} {
		got := Decode(tc.table, tc.lockTable, tc.key)
		if got != tc.want || got.Part() != tc.part {
			t.Errorf("Decode(%s, %q) = %+v %q; want %+v %q", tc.table, tc.key, got, got.Part(), tc.want, tc.part)
		}
	}
}

// TestParseKinds: singular or plural, any case, comma separated; an
// unknown kind is refused.
func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("Locks, job,advisory")
	if err != nil || len(got) != 3 || !got[Lock] || !got[Job] || !got[Advisory] {
		t.Errorf("ParseKinds = %v, %v", got, err)
	}
	if _, err := ParseKinds("mutexes"); err == nil {
		t.Error("ParseKinds(mutexes) took it")
	}
}
