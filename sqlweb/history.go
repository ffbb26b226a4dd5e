package sqlweb

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/holds"
)

// history is what the handler sampled over the window: every hold it saw
// and the number of waiting sessions at each refresh, on the database's
// clock.
type history struct {
	window time.Duration

	mu     sync.Mutex
	offset time.Duration    // the database's clock minus ours, as last seen
	holds  map[string]*seen // by table, row key and token
	waits  []waitPoint
	queued map[string]*waiter   // by table, row key and waiter id
	dues   map[string]time.Time // each job's next due, as last read
	skips  map[string]*skip     // by job and due
}

// skip is a job's firing that came due and passed with no run: its next
// due, as the last run recorded it, passed by skipGrace and the schedule
// did not move on (a run records the firing after its own as it starts).
type skip struct {
	Job   string
	Due   time.Time // the firing missed
	Seen  time.Time // the refresh that found it passed
	Held  bool      // the job was held then: a run still going, or its hold-at-least
	Ended time.Time // the refresh that saw the schedule move on (a run began); zero: not yet
}

// skipGrace is how late a run may begin after its firing and still count
// as that firing's: the replicas' clocks, the database's, and Run's
// statements before it records the next due.
const skipGrace = 5 * time.Second

// schedule records the next due of every job (due, as read at now, on
// the database's clock) and the firings that passed with no run.
func (h *history) schedule(now time.Time, due map[string]time.Time, rows []holds.Row) {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := map[string]bool{}
	for _, r := range rows {
		if r.Kind == holds.Job {
			held[r.Key] = true
		}
	}
	for job, at := range due {
		if prev, ok := h.dues[job]; ok && !prev.Equal(at) {
			for _, k := range h.skips {
				if k.Job == job && k.Ended.IsZero() {
					k.Ended = now // a run began and recorded its next due
				}
			}
		}
		h.dues[job] = at
		id := job + "\x00" + at.String()
		if now.After(at.Add(skipGrace)) && h.skips[id] == nil {
			h.skips[id] = &skip{Job: job, Due: at, Seen: now, Held: held[job]}
		}
	}
	from := now.Add(-h.window)
	for id, k := range h.skips {
		if !k.Ended.IsZero() && k.Ended.Before(from) {
			delete(h.skips, id)
		}
	}
}

// Status says whether a run has begun since the missed firing, at now.
func (k skip) Status(now time.Time) string {
	if k.Ended.IsZero() {
		return "no run yet: overdue by " + span(now.Sub(k.Due))
	}
	return "missed; a run began by " + stamp(k.Ended)
}

// Why says what kept the firing from running, as far as the page saw.
func (k skip) Why() string {
	if k.Held {
		return "the job was held: a run still going, or its hold-at-least"
	}
	return "no replica took the job"
}

// skipped lists the skipped firings, newest first: those a run ended in
// the window, and those no run has ended yet.
func (h *history) skipped() []skip {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]skip, 0, len(h.skips))
	for _, k := range h.skips {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b skip) int {
		if c := b.Due.Compare(a.Due); c != 0 {
			return c
		}
		return strings.Compare(a.Job, b.Job)
	})
	return out
}

// seen is one hold as last sampled.
type seen struct {
	kind, key, host string
	token           int64
	start, last     time.Time // acquired; last seen, on the database's clock
	held            time.Duration
	open            bool // listed at the last refresh
	nextDue         time.Time
}

type waitPoint struct {
	at    time.Time
	n     int
	byKey map[[2]string]int // waiters per kind and key, where known
}

// waiter is one waiter for a key as last sampled. No dialect records when
// a wait began (a queue entry carries no time), so its wait is counted
// from the sample that first saw it to the last that did.
type waiter struct {
	kind, key   string
	first, last time.Time // on the database's clock
	open        bool      // seen at the last refresh
}

func newHistory(window time.Duration) *history {
	return &history{window: window, holds: map[string]*seen{}, queued: map[string]*waiter{}, dues: map[string]time.Time{}, skips: map[string]*skip{}}
}

// now is the database's clock, as far as the last rows told it.
func (h *history) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Now().Add(h.offset)
}

// add records the rows read at local (our clock, just before the read)
// and returns the database's time of the read.
func (h *history) add(local time.Time, rows []holds.Row, waiting int, waits []holds.Wait) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rows {
		if !r.Acquired.IsZero() {
			h.offset = r.Now().Sub(local)
			break
		}
	}
	now := local.Add(h.offset)
	for _, s := range h.holds {
		s.open = false
	}
	for _, r := range rows {
		if r.Table == "" {
			continue // advisory: no token, no times
		}
		id := r.Table + "\x00" + r.RowKey + "\x00" + fmt.Sprint(r.Token)
		s := h.holds[id]
		if s == nil {
			s = &seen{kind: r.Kind, key: r.Key, token: r.Token, start: r.Acquired}
			h.holds[id] = s
		}
		s.host, s.held, s.last, s.open, s.nextDue = r.Host, r.HeldFor(), r.Now(), true, r.NextDue
	}
	from := now.Add(-h.window)
	for id, s := range h.holds {
		if s.last.Before(from) {
			delete(h.holds, id)
		}
	}
	for _, w := range h.queued {
		w.open = false
	}
	byKey := map[[2]string]int{}
	for _, w := range waits {
		id := w.Table + "\x00" + w.RowKey + "\x00" + w.ID
		q := h.queued[id]
		if q == nil {
			q = &waiter{kind: w.Kind, key: w.Key, first: now}
			h.queued[id] = q
		}
		q.last, q.open = now, true
		byKey[[2]string{w.Kind, w.Key}]++
	}
	for id, q := range h.queued {
		if q.last.Before(from) {
			delete(h.queued, id)
		}
	}
	h.waits = append(h.waits, waitPoint{now, waiting, byKey})
	i := 0
	for i < len(h.waits) && h.waits[i].at.Before(from) {
		i++
	}
	h.waits = h.waits[i:]
	return now
}

// run is one job run the handler saw.
type run struct {
	Key, Host, Outcome string
	Token              int64
	Start, NextDue     time.Time
	Held               time.Duration
}

// runs lists the job runs seen in the window, newest first.
func (h *history) runs(_ []holds.Row) []run {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []run
	for _, s := range h.holds {
		if s.kind != holds.Job {
			continue
		}
		outcome := "ended"
		if s.open {
			outcome = "held"
		}
		out = append(out, run{Key: s.key, Host: s.host, Outcome: outcome, Token: s.token, Start: s.start, NextDue: s.nextDue, Held: s.held})
	}
	slices.SortFunc(out, func(a, b run) int { return b.Start.Compare(a.Start) })
	// The newest runs of each job: a job every second would fill the page.
	per := map[string]int{}
	return slices.DeleteFunc(out, func(r run) bool {
		per[r.Key]++
		return per[r.Key] > maxRuns
	})
}

// maxRuns is how many runs of a job the page lists; maxCharts how many
// keys it charts, those with the most holds seen.
const (
	maxRuns   = 10
	maxCharts = 24
)

// chart is one key's hold times.
type chart struct {
	Kind, Key string
	Points    int
	Max       time.Duration
	SVG       template.HTML
}

const (
	chartW, chartH = 320, 80
	padL, padB     = 4, 4
)

// charts draws, per key, one point per hold seen in the window: at the
// time it began, as high as it was held when last seen.
func (h *history) charts(now time.Time) []chart {
	h.mu.Lock()
	defer h.mu.Unlock()
	byKey := map[[2]string][]*seen{}
	for _, s := range h.holds {
		if s.kind == holds.Job || s.kind == holds.Leader || s.kind == holds.Lock || s.kind == holds.Semaphore || s.kind == holds.RWLock {
			k := [2]string{s.kind, s.key}
			byKey[k] = append(byKey[k], s)
		}
	}
	keys := chartKeys(byKey)
	from := now.Add(-h.window)
	var out []chart
	for _, k := range keys {
		ss := byKey[k]
		slices.SortFunc(ss, func(a, b *seen) int { return a.start.Compare(b.start) })
		var top time.Duration
		for _, s := range ss {
			top = max(top, s.held)
		}
		scale := max(top, time.Second)
		var b strings.Builder
		fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, chartW, chartH, chartW, chartH)
		axis(&b, h.window, "")
		for _, s := range ss {
			x := padL + 3 + float64(chartW-padL-8)*frac(s.start.Sub(from), h.window)
			y := float64(chartH-padB-16) * (1 - frac(s.held, scale))
			fill := "#0969da"
			if !s.open {
				fill = "#8c959f"
			}
			fmt.Fprintf(&b, `<circle class="pt" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>token %d: held %s</title></circle>`,
				x, y+2, fill, s.token, span(s.held))
		}
		b.WriteString(`</svg>`)
		out = append(out, chart{Kind: k[0], Key: k[1], Points: len(ss), Max: top, SVG: template.HTML(b.String())}) // numbers only
	}
	return out
}

// waitChart draws the number of waiting sessions at each refresh.
func (h *history) waitChart(now time.Time) template.HTML {
	h.mu.Lock()
	defer h.mu.Unlock()
	top := 0
	for _, p := range h.waits {
		top = max(top, p.n)
	}
	if top == 0 {
		return ""
	}
	from := now.Add(-h.window)
	var pts []string
	for _, p := range h.waits {
		x := padL + 3 + float64(chartW-padL-8)*frac(p.at.Sub(from), h.window)
		y := 2 + float64(chartH-padB-14)*(1-float64(p.n)/float64(top))
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, chartW, chartH, chartW, chartH)
	axis(&b, h.window, fmt.Sprintf("max %d", top))
	fmt.Fprintf(&b, `<polyline class="waits" fill="none" stroke="#bf8700" stroke-width="1.5" points="%s"/>`, strings.Join(pts, " "))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers only
}

// axis draws the time axis of a chart over window, and top at its top.
func axis(b *strings.Builder, window time.Duration, top string) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d0d7de"/>`, padL, chartH-padB-10, chartW, chartH-padB-10)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="9" fill="#57606a">-%s</text>`, padL, chartH-padB, window)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="9" fill="#57606a" text-anchor="end">now</text>`, chartW-2, chartH-padB)
	if top != "" {
		fmt.Fprintf(b, `<text x="%d" y="10" font-size="9" fill="#57606a" text-anchor="end">%s</text>`, chartW-2, top)
	}
}

func frac(d, of time.Duration) float64 {
	if of <= 0 {
		return 0
	}
	return min(max(float64(d)/float64(of), 0), 1)
}

// keyWaits is one key's waits.
type keyWaits struct {
	Kind, Key string
	Waits     int           // waiters seen in the window
	Now       int           // waiting at the last refresh
	Longest   time.Duration // the longest wait seen
	SVG       template.HTML
}

// waitCharts draws, per key whose waiters the page saw, the number waiting
// at each refresh (a line) and one point per waiter: at the refresh that
// first saw it, as high as it had waited when last seen (orange: still
// waiting).
func (h *history) waitCharts(now time.Time) []keyWaits {
	h.mu.Lock()
	defer h.mu.Unlock()
	byKey := map[[2]string][]*waiter{}
	for _, w := range h.queued {
		k := [2]string{w.kind, w.key}
		byKey[k] = append(byKey[k], w)
	}
	keys := chartKeys(byKey)
	from := now.Add(-h.window)
	x := func(t time.Time) float64 { return padL + 3 + float64(chartW-padL-8)*frac(t.Sub(from), h.window) }
	var out []keyWaits
	for _, k := range keys {
		ws := byKey[k]
		slices.SortFunc(ws, func(a, b *waiter) int { return a.first.Compare(b.first) })
		kw := keyWaits{Kind: k[0], Key: k[1], Waits: len(ws)}
		for _, w := range ws {
			kw.Longest = max(kw.Longest, w.last.Sub(w.first))
			if w.open {
				kw.Now++
			}
		}
		top := 0
		for _, p := range h.waits {
			top = max(top, p.byKey[k])
		}
		scale := max(kw.Longest, time.Second)
		var b strings.Builder
		fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, chartW, chartH, chartW, chartH)
		axis(&b, h.window, fmt.Sprintf("max %d waiting", top))
		var pts []string
		for _, p := range h.waits {
			if p.at.Before(ws[0].first) {
				continue // before the key's first waiter: nothing to draw
			}
			y := 2 + float64(chartH-padB-14)*(1-float64(p.byKey[k])/float64(max(top, 1)))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.at), y))
		}
		fmt.Fprintf(&b, `<polyline class="waiting" fill="none" stroke="#d0d7de" stroke-width="1.5" points="%s"/>`, strings.Join(pts, " "))
		for _, w := range ws {
			d := w.last.Sub(w.first)
			y := float64(chartH-padB-16) * (1 - frac(d, scale))
			fill := "#bf8700"
			if !w.open {
				fill = "#8c959f"
			}
			fmt.Fprintf(&b, `<circle class="wait" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>waited %s</title></circle>`, x(w.first), y+2, fill, span(d))
		}
		b.WriteString(`</svg>`)
		kw.SVG = template.HTML(b.String()) // numbers only
		out = append(out, kw)
	}
	return out
}

// chartKeys orders the (kind, key) pairs to chart by kind, then key: the
// maxCharts with the most points when there are more.
func chartKeys[T any](byKey map[[2]string][]T) [][2]string {
	keys := make([][2]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := slices.Index(holds.Kinds, a[0]) - slices.Index(holds.Kinds, b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	if len(keys) > maxCharts {
		slices.SortStableFunc(keys, func(a, b [2]string) int { return len(byKey[b]) - len(byKey[a]) })
		keys = keys[:maxCharts]
	}
	return keys
}
