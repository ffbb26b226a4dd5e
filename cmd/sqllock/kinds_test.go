package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/election"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// kindRow is a row of `locks --json`, as a script reads it.
type kindRow struct {
	Kind, Key, Owner, Host, State, Value string
	Token, Term                          int64
	Slot                                 *int
	Held, Of, Readers                    int
	WriterWaiting                        bool `json:"writer_waiting"`
	Acquired, Expires, Since             time.Time
	NextDue                              time.Time `json:"next_due"`
}

// soon is a schedule that fires a moment after it is asked.
type soon struct{}

func (soon) Next(t time.Time) time.Time { return t.Add(10 * time.Millisecond) }

// TestLocksListsEveryKind: a hold of each primitive (a tablelock lock, a
// jobguard job, semaphore permits, rwlock read and write holds, an
// election's leader, an advisory lock where the server shows it) is
// listed by `locks --json` by default, under its kind and the name the
// application gave it, with the fields that describe it (a permit's slot
// of N, a looping job's next due, as migration 00017 keeps them); the table shows
// them with no control byte; --kind filters; and release --force frees a
// permit, a reader, a writer and a leader, each audited under its kind.
func TestLocksListsEveryKind(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		id := fmt.Sprintf("%x", rand.Uint32())
		opts := []tablelock.Option{tablelock.WithTTL(time.Minute), tablelock.WithNotify(false)}
		hold := func(l sqllock.Lease, err error) sqllock.Lease {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Release(context.Background()) })
			return l
		}

		tl, err := tablelock.New(d.db, d.dialect, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer tl.Close()
		lockKey := "orders/" + id
		lock := hold(tl.Acquire(sqllock.WithOwner(ctx, "billing-7"), lockKey))

		g, err := jobguard.New(d.db, d.dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		jobName := "reports/" + id
		job := hold(g.TryAcquire(ctx, jobguard.Job{Name: jobName, AtMost: time.Minute}))

		// A job that Loop runs: its runner records when it fires next.
		loopName := "nightly/" + id
		loopCtx, stopLoop := context.WithCancel(ctx)
		running, loopDone := make(chan time.Time, 1), make(chan error, 1)
		go func() {
			loopDone <- g.Loop(loopCtx, jobguard.Job{Name: loopName, AtMost: time.Minute}, soon{}, func(ctx context.Context) error {
				select {
				case running <- time.Now():
				default:
				}
				<-ctx.Done()
				return nil
			})
		}()
		defer func() { stopLoop(); <-loopDone }()
		var loopStarted time.Time
		select {
		case loopStarted = <-running:
		case <-ctx.Done():
			t.Fatal("the looping job never ran")
		}

		sem, err := semaphore.New(d.db, d.dialect, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer sem.Close()
		semKey := "exports/" + id
		p1 := hold(sem.Acquire(ctx, semKey, 3)).(*semaphore.Permit)
		p2 := hold(sem.Acquire(ctx, semKey, 3)).(*semaphore.Permit)

		rw, err := rwlock.New(d.db, d.dialect, 4, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		readKey, writeKey := "catalog/"+id, "config/"+id
		r1 := hold(rw.RLock(ctx, readKey)).(*rwlock.Lease)
		hold(rw.RLock(ctx, readKey))
		w := hold(rw.Lock(ctx, writeKey)).(*rwlock.Lease)

		el, err := election.New(d.db, d.dialect, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer el.Close()
		elName := "scheduler-" + id
		leader, err := el.Campaign(ctx, elName, "http://10.0.0.7:8080")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = leader.Resign(context.Background()) })

		advKey := "adv/" + id
		if d.dialect != sqllock.SQLite {
			holdAdvisory(t, d.db, d.dialect, advKey)
		}

		locks := func(args ...string) []kindRow {
			t.Helper()
			var out, errb strings.Builder
			code := run(ctx, append(args, "--json", "--key", advKey, "--dsn", d.dsn), env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
			if code != 0 {
				t.Fatalf("locks %v: exit %d: %s", args, code, errb.String())
			}
			var rows []kindRow
			if err := json.Unmarshal([]byte(out.String()), &rows); err != nil {
				t.Fatalf("locks %v: not JSON: %v\n%s", args, err, out.String())
			}
			var mine []kindRow
			for _, r := range rows {
				if strings.Contains(r.Key, id) {
					mine = append(mine, r)
				}
				if strings.ContainsAny(r.Key, "\x1f") || strings.HasPrefix(r.Key, election.KeyPrefix) {
					t.Errorf("a key as stored, not as named: %q (%s)", r.Key, r.Kind)
				}
			}
			return mine
		}
		find := func(rows []kindRow, kind, key string) []kindRow {
			var out []kindRow
			for _, r := range rows {
				if r.Kind == kind && r.Key == key {
					out = append(out, r)
				}
			}
			return out
		}
		rows := locks("locks")
		t.Logf("locks --json, this test's rows: %+v", rows)

		if got := find(rows, "lock", lockKey); len(got) != 1 || got[0].Owner != "billing-7" || got[0].Token != lock.Token() || got[0].Host == "" || !got[0].Expires.After(got[0].Acquired) {
			t.Errorf("lock %q: %+v; want owner billing-7, token %d, a host, expiry after acquisition", lockKey, got, lock.Token())
		}
		if got := find(rows, "job", jobName); len(got) != 1 || got[0].State != "running" || got[0].Token != job.Token() || !got[0].NextDue.IsZero() {
			t.Errorf("job %q: %+v; want running, token %d, no next due (no schedule)", jobName, got, job.Token())
		}
		if got := find(rows, "job", loopName); len(got) != 1 || got[0].State != "running" ||
			got[0].NextDue.Before(loopStarted.Add(-time.Second)) || got[0].NextDue.After(loopStarted.Add(time.Second)) {
			t.Errorf("looping job %q: %+v; want running, next due about %v", loopName, got, loopStarted)
		}
		got := find(rows, "semaphore", semKey)
		slots := map[int]int64{p1.Slot(): p1.Token(), p2.Slot(): p2.Token()}
		if len(got) != 2 {
			t.Errorf("semaphore %q: %d rows, want 2 permits: %+v", semKey, len(got), got)
		}
		for _, r := range got {
			if r.Slot == nil || slots[*r.Slot] != r.Token || r.Held != 2 || r.Of != 3 || r.Owner == "" || r.Host == "" {
				t.Errorf("semaphore %q permit %+v; want slots %v with their tokens, 2 held of 3, a holder and host", semKey, r, slots)
			}
		}
		got = find(rows, "rwlock", readKey)
		if len(got) != 2 {
			t.Errorf("rwlock %q: %d rows, want 2 readers: %+v", readKey, len(got), got)
		}
		for _, r := range got {
			if r.State != "read" || r.Slot == nil || r.Readers != 2 || r.WriterWaiting {
				t.Errorf("rwlock reader %+v; want read, a row, 2 readers, no writer waiting", r)
			}
		}
		if got := find(rows, "rwlock", writeKey); len(got) != 1 || got[0].State != "write" || got[0].Slot != nil || got[0].Token != w.Token() {
			t.Errorf("rwlock %q: %+v; want one write hold, token %d", writeKey, got, w.Token())
		}
		if got := find(rows, "leader", elName); len(got) != 1 || got[0].Value != "http://10.0.0.7:8080" || got[0].Term != leader.Term() || got[0].Since.IsZero() {
			t.Errorf("leader %q: %+v; want value http://10.0.0.7:8080, term %d, since", elName, got, leader.Term())
		}
		if d.dialect != sqllock.SQLite {
			if got := find(rows, "advisory", advKey); len(got) != 1 || got[0].State != "held" {
				t.Errorf("advisory %q: %+v; want held", advKey, got)
			}
		}

		// The table: every kind's group, no control byte.
		var out strings.Builder
		if code := run(ctx, []string{"locks", "--key", advKey, "--dsn", d.dsn}, env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}); code != 0 {
			t.Fatalf("locks: exit %d\n%s", code, out.String())
		}
		t.Logf("locks:\n%s", out.String())
		checkSafe(t, "locks", out.String(), id)
		for _, s := range []string{"locks (", "jobs (", "semaphore permits (", "rwlock holds (", "leaders (", lockKey, jobName, semKey, readKey, writeKey, elName, "http://10.0.0.7:8080",
			"NEXT DUE", loopName, "2 of 3", fmt.Sprintf("%d of 3", p1.Slot())} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("the table lacks %q", s)
			}
		}

		// --kind filters.
		for _, r := range locks("locks", "--kind", "semaphores,leader") {
			if r.Kind != "semaphore" && r.Kind != "leader" {
				t.Errorf("--kind semaphores,leader lists a %s: %+v", r.Kind, r)
			}
		}

		// release --force of each kind that can be forced, audited as such.
		cmd := func(code int, args ...string) string {
			t.Helper()
			var out, errb strings.Builder
			if got := run(ctx, append(args, "--dsn", d.dsn), env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}); got != code {
				t.Fatalf("%v: exit %d, want %d\n%s%s", args, got, code, out.String(), errb.String())
			}
			return out.String() + errb.String()
		}
		if msg := cmd(exitUsage, "locks", "release", semKey, "--kind", "semaphore", "--force", "--reason", "r"); !strings.Contains(msg, "--slot") {
			t.Errorf("release of a semaphore with 2 permits held and no --slot: %q; want it to ask for --slot", msg)
		}
		cmd(exitOK, "locks", "release", semKey, "--kind", "semaphore", "--slot", fmt.Sprint(p1.Slot()), "--force", "--reason", "INC-1")
		cmd(exitOK, "locks", "release", readKey, "--kind", "rwlock", "--slot", fmt.Sprint(readerRow(t, rows, readKey, r1.Token())), "--force", "--reason", "INC-2")
		cmd(exitOK, "locks", "release", writeKey, "--kind", "rwlock", "--slot", "writer", "--force", "--reason", "INC-3")
		cmd(exitOK, "locks", "release", elName, "--kind", "leader", "--force", "--reason", "INC-4")
		if d.dialect != sqllock.SQLite {
			cmd(exitUsage, "locks", "release", advKey, "--kind", "advisory", "--force", "--reason", "r")
		}
		after := locks("locks")
		if n := len(find(after, "semaphore", semKey)); n != 1 {
			t.Errorf("%d permits of %q listed after one of 2 was forced, want 1", n, semKey)
		}
		if n := len(find(after, "rwlock", readKey)) + len(find(after, "rwlock", writeKey)) + len(find(after, "leader", elName)); n != 1 {
			t.Errorf("%d rwlock rows and leaders listed after the forced releases, want the 1 reader left: %+v", n, after)
		}
		var audit []struct{ Kind, Key, Part, Reason string }
		var aout strings.Builder
		if code := run(ctx, []string{"locks", "--audit", "--json", "--dsn", d.dsn}, env{stdout: &aout, stderr: &aout, getenv: func(string) string { return "" }}); code != 0 {
			t.Fatalf("locks --audit: %d %s", code, aout.String())
		}
		if err := json.Unmarshal([]byte(aout.String()), &audit); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"INC-1": "semaphore " + semKey + " permit " + fmt.Sprint(p1.Slot()),
			"INC-2": "rwlock " + readKey + " reader " + fmt.Sprint(readerRow(t, rows, readKey, r1.Token())),
			"INC-3": "rwlock " + writeKey + " writer",
			"INC-4": "leader " + elName + " ",
		}
		for _, a := range audit {
			if w, ok := want[a.Reason]; ok {
				if got := a.Kind + " " + a.Key + " " + a.Part; got != w {
					t.Errorf("audit record %q names %q, want %q", a.Reason, got, w)
				}
				delete(want, a.Reason)
			}
		}
		if len(want) > 0 {
			t.Errorf("no audit record of %v in %+v", want, audit)
		}
	})
}

// readerRow returns the row of key's reader holding token, as listed.
func readerRow(t *testing.T, rows []kindRow, key string, token int64) int {
	t.Helper()
	for _, r := range rows {
		if r.Kind == "rwlock" && r.Key == key && r.Token == token && r.Slot != nil {
			return *r.Slot
		}
	}
	t.Fatalf("no reader row of %q with token %d in %+v", key, token, rows)
	return -1
}
