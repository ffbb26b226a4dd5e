package sqlweb

import (
	"strconv"
	"time"

	"github.com/sqllock/sqllock/internal/holds"
)

// stampLayout is the one form of every instant the page shows, as the
// command prints them: RFC 3339 to the millisecond, in UTC.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(stampLayout)
}

func span(d time.Duration) string { return d.Round(time.Millisecond).String() }

type cell struct{ Text, Class string }

type rowView struct {
	Kind, Key string
	Cells     []cell
	Release   string // the release form's address; "": none
}

type groupView struct {
	Kind, Title string
	Header      []string
	Rows        []rowView
}

var titles = map[string]string{
	holds.Lock:      "Locks",
	holds.Job:       "Jobs",
	holds.Semaphore: "Semaphore permits",
	holds.RWLock:    "Rwlock holds",
	holds.Leader:    "Leaders",
	holds.Advisory:  "Advisory locks, as the server shows them",
}

// groupsOf groups rows by kind, in the order of holds.Kinds, with the
// columns of their kind and, with force, a release link per forcible row.
func groupsOf(rows []holds.Row, force bool) []groupView {
	var out []groupView
	for _, k := range holds.Kinds {
		g := groupView{Kind: k, Title: titles[k]}
		switch k {
		case holds.Advisory:
			g.Header = []string{"key", "session", "holder host/pid", "state"}
		case holds.Leader:
			g.Header = []string{"election", "value", "term", "since", "holder host/pid", "held for", "expires in"}
		case holds.Job:
			g.Header = []string{"job", "state", "owner", "holder host/pid", "token", "held for", "expires in", "next due"}
		case holds.Semaphore:
			g.Header = []string{"key", "slot", "held", "owner", "holder host/pid", "token", "held for", "expires in"}
		case holds.RWLock:
			g.Header = []string{"key", "hold", "readers", "writer waiting", "holder host/pid", "token", "held for", "expires in"}
		default:
			g.Header = []string{"key", "owner", "holder host/pid", "token", "holds", "held for", "expires in"}
		}
		for _, r := range rows {
			if r.Kind != k {
				continue
			}
			v := rowView{Kind: r.Kind, Key: r.Key}
			key := cell{r.Key, "key"}
			tok := cell{Text: strconv.FormatInt(r.Token, 10), Class: "token"}
			times := []cell{{Text: span(r.HeldFor())}, expires(r)}
			switch k {
			case holds.Advisory:
				v.Cells = []cell{key, {Text: r.Owner}, {Text: r.Host}, {Text: r.State}}
			case holds.Leader:
				v.Cells = append([]cell{key, {Text: r.Value}, {Text: strconv.FormatInt(r.Term, 10)}, {Text: stamp(r.Since)}, {Text: r.Host}}, times...)
			case holds.Job:
				v.Cells = append([]cell{key, {Text: r.State}, {Text: r.Owner, Class: "owner"}, {Text: r.Host}, tok}, times...)
				v.Cells = append(v.Cells, cell{Text: stamp(r.NextDue)})
			case holds.Semaphore:
				v.Cells = append([]cell{key, {Text: r.SlotText()}, {Text: r.HeldText()}, {Text: r.Owner, Class: "owner"}, {Text: r.Host}, tok}, times...)
			case holds.RWLock:
				v.Cells = append([]cell{key, {Text: r.HoldText()}, {Text: strconv.Itoa(r.Readers)}, {Text: r.WriterWaitingText()}, {Text: r.Host}, tok}, times...)
			default:
				v.Cells = append([]cell{key, {Text: r.Owner, Class: "owner"}, {Text: r.Host, Class: "host"}, tok, {Text: strconv.Itoa(r.Holds)}}, times...)
			}
			if force && r.Table != "" {
				v.Release = releaseLink(r)
			}
			g.Rows = append(g.Rows, v)
		}
		if len(g.Rows) > 0 {
			out = append(out, g)
		}
	}
	return out
}

func expires(r holds.Row) cell {
	in := r.ExpiresIn()
	c := cell{Text: span(in)}
	if in < 5*time.Second {
		c.Class = "expiring"
	}
	return c
}
