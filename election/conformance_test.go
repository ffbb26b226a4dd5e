package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestConformance runs every statement an election takes, on each
// dialect, from three Elections: a campaign leads and Leader shows it, a
// second campaigner waits and leads after the resign with a larger term,
// an Observe started before both delivers the second, and no one leads
// after the last resign. .ci/step-roles runs it as the application role
// of the README's "Roles and grants".
func TestConformance(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, b, obs := newElection(t, db), newElection(t, db), newElection(t, db)
		name := locktest.Key(t)
		octx, ocancel := context.WithCancel(ctx)
		defer ocancel()
		seen, err := obs.Observe(octx, name)
		if err != nil {
			t.Fatal(err)
		}
		la, err := a.Campaign(ctx, name, "a")
		if err != nil {
			t.Fatal(err)
		}
		if ld, err := b.Leader(ctx, name); err != nil || ld.Term != la.Term() || ld.Value != "a" {
			t.Fatalf("Leader = %+v, %v; want term %d, value a", ld, err, la.Term())
		}

		won := make(chan *election.Leadership, 1)
		go func() {
			l, err := b.Campaign(ctx, name, "b")
			if err != nil {
				t.Error(err)
			}
			won <- l
		}()
		select {
		case <-won:
			t.Fatal("a second campaigner led beside the leader")
		case <-time.After(150 * time.Millisecond):
		}
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		var lb *election.Leadership
		select {
		case lb = <-won:
		case <-ctx.Done():
			t.Fatal("the campaigner did not lead after the resign")
		}
		if lb == nil {
			return
		}
		if lb.Term() <= la.Term() {
			t.Errorf("the second term %d not above the first %d", lb.Term(), la.Term())
		}
		if ld, err := a.Leader(ctx, name); err != nil || ld.Term != lb.Term() || ld.Value != "b" {
			t.Fatalf("Leader = %+v, %v; want term %d, value b", ld, err, lb.Term())
		}
		// The second leadership began well after Observe started, so it
		// must come; the first may race Observe's start.
		for delivered := false; !delivered; {
			select {
			case ld := <-seen:
				if ld.Term != la.Term() && ld.Term != lb.Term() {
					t.Fatalf("Observe delivered term %d, not one of %d, %d", ld.Term, la.Term(), lb.Term())
				}
				delivered = ld.Term == lb.Term() && ld.Value == "b"
			case <-ctx.Done():
				t.Fatalf("Observe never delivered term %d", lb.Term())
			}
		}
		if err := lb.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if ld, err := obs.Leader(ctx, name); !errors.Is(err, election.ErrNoLeader) {
			t.Fatalf("Leader after the last resign = %+v, %v; want ErrNoLeader", ld, err)
		}
		ocancel()
		for range seen { // closed once its context ends
		}
	})
}
