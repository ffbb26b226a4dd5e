package sqlweb

import (
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/holds"
)

// TestScheduleSkips: a job's next due counts as a skipped firing only once
// it has passed by skipGrace with the schedule unmoved; it is one firing
// however many refreshes see it; a run that records the next due ends it;
// a job held at the time says so.
func TestScheduleSkips(t *testing.T) {
	h := newHistory(time.Minute)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	due := map[string]time.Time{"a": t0, "b": t0}
	held := []holds.Row{{Kind: holds.Job, Key: "b"}}

	h.schedule(t0.Add(skipGrace-time.Millisecond), due, nil)
	if got := h.skipped(); len(got) != 0 {
		t.Fatalf("within the grace: %+v, want no skipped firing", got)
	}
	h.schedule(t0.Add(skipGrace+time.Millisecond), due, held)
	h.schedule(t0.Add(skipGrace+time.Second), due, held)
	got := h.skipped()
	if len(got) != 2 || got[0].Job != "a" || got[1].Job != "b" {
		t.Fatalf("past the grace, seen twice: %+v, want one firing of a and one of b", got)
	}
	if got[0].Held || !got[1].Held || !strings.Contains(got[1].Why(), "held") {
		t.Errorf("held: a %v, b %v (%q); want only b held", got[0].Held, got[1].Held, got[1].Why())
	}
	if s := got[0].Status(t0.Add(time.Minute)); s != "no run yet: overdue by 1m0s" {
		t.Errorf("status %q", s)
	}

	// a runs and records its next firing; b does not.
	end := t0.Add(10 * time.Second)
	h.schedule(end, map[string]time.Time{"a": t0.Add(time.Hour), "b": t0}, nil)
	for _, k := range h.skipped() {
		switch {
		case k.Job == "a" && !k.Ended.Equal(end):
			t.Errorf("a's firing ended %v, want %v (its next due moved)", k.Ended, end)
		case k.Job == "b" && !k.Ended.IsZero():
			t.Errorf("b's firing ended %v; no run recorded a next due", k.Ended)
		}
	}
	// Ended more than a window ago: gone; b's, still open, stays.
	h.schedule(end.Add(2*time.Minute), map[string]time.Time{"a": t0.Add(time.Hour), "b": t0}, nil)
	if got := h.skipped(); len(got) != 1 || got[0].Job != "b" {
		t.Errorf("a window after a's run: %+v, want b's firing alone", got)
	}
}

// TestWaitCharts: a key's waits chart has one point per waiter seen, the
// one still waiting orange and the one gone grey, as high as the time
// between the first and the last refresh that saw it.
func TestWaitCharts(t *testing.T) {
	h := newHistory(time.Minute)
	row := holds.Row{Kind: holds.Lock, Key: "k", Table: "sqllock_locks", RowKey: "k"}
	w := func(id string) holds.Wait {
		return holds.Wait{Kind: holds.Lock, Key: "k", Table: "sqllock_locks", RowKey: "k", ID: id}
	}
	t0 := time.Now()
	h.add(t0, []holds.Row{row}, 0, []holds.Wait{w("x")})
	h.add(t0.Add(time.Second), []holds.Row{row}, 0, []holds.Wait{w("x"), w("y")})
	h.add(t0.Add(3*time.Second), []holds.Row{row}, 0, []holds.Wait{w("y")})
	got := h.waitCharts(t0.Add(3 * time.Second))
	if len(got) != 1 || got[0].Key != "k" || got[0].Waits != 2 || got[0].Now != 1 || got[0].Longest != 2*time.Second {
		t.Fatalf("waitCharts = %+v; want key k, 2 waiters, 1 now, longest 2s", got)
	}
	svg := string(got[0].SVG)
	if n := strings.Count(svg, `class="wait"`); n != 2 {
		t.Errorf("%d wait points, want 2", n)
	}
	if !strings.Contains(svg, `fill="#8c959f"><title>waited 1s</title>`) || !strings.Contains(svg, `fill="#bf8700"><title>waited 2s</title>`) {
		t.Errorf("want x grey at 1s and y orange at 2s:\n%s", svg)
	}
	if !strings.Contains(svg, "max 2 waiting") {
		t.Errorf("the line's top is not 2:\n%s", svg)
	}
}
