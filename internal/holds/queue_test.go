package holds

import (
	"testing"

	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// TestGateWaits: a MariaDB session waiting on the gate of a held row is a
// waiter of that row's key, named as the listing names it; the gate's
// holder, a waiter on a gate of no listed row and an application's own
// GET_LOCK are not.
func TestGateWaits(t *testing.T) {
	lt := tablelock.DefaultTable
	rows := []Row{
		{Kind: Lock, Key: "orders/7", Table: lt, RowKey: "orders/7"},
		{Kind: Semaphore, Key: "exports", Table: semaphore.DefaultTable, RowKey: "exports#1"},
	}
	adv := []Row{
		{Kind: Advisory, Key: locktable.GateName(lt, "orders/7"), Owner: "connection 10", State: "held"},
		{Kind: Advisory, Key: locktable.GateName(lt, "orders/7"), Owner: "connection 11", State: "waiting"},
		{Kind: Advisory, Key: locktable.GateName(semaphore.DefaultTable, "exports#1"), Owner: "connection 12", State: "waiting"},
		{Kind: Advisory, Key: locktable.GateName(lt, "exports#1"), Owner: "connection 13", State: "waiting"},
		{Kind: Advisory, Key: "orders/7", Owner: "connection 14", State: "waiting"},
	}
	got := GateWaits(rows, adv)
	want := []Wait{
		{Kind: Lock, Key: "orders/7", Table: lt, RowKey: "orders/7", ID: "connection 11"},
		{Kind: Semaphore, Key: "exports", Table: semaphore.DefaultTable, RowKey: "exports#1", ID: "connection 12"},
	}
	if len(got) != len(want) {
		t.Fatalf("GateWaits = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
