package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/jobguard"
)

// TestWebSkippedFirings: on each dialect, a job whose next due (as a run
// recorded it in the schedule table) passed with no run shows among the
// skipped firings, "no run yet"; once a run begins and records its next
// due, the same firing shows as missed and no other is added, while the
// job keeps running on time. A job due in the future shows nothing.
func TestWebSkippedFirings(t *testing.T) {
	ctx := browser(t)
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		url, _ := startWeb(t, d.dsn)
		id := fmt.Sprintf("%x", rand.Uint32())
		late, ahead := "nightly/"+id, "hourly/"+id
		// What a fleet that stopped a minute before a firing leaves: the
		// next due its last run recorded, in the past.
		setDue(t, d, late, time.Now().Add(-time.Minute))
		setDue(t, d, ahead, time.Now().Add(time.Hour))

		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		row := fmt.Sprintf(`#skipped tr.skip[data-key=%q]`, late)
		jsUntil(t, ctx, "the skipped firing", fmt.Sprintf(`document.querySelector(%q) !== null`, row))
		if txt := jsString(t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, row)); !strings.Contains(txt, "no run yet") || !strings.Contains(txt, "no replica took the job") {
			t.Errorf("the skipped firing reads %q; want no run yet, and no replica took it", txt)
		}
		if n := jsInt(t, ctx, fmt.Sprintf(`document.querySelectorAll('#skipped tr.skip[data-key=%q]').length`, ahead)); n != 0 {
			t.Errorf("a job due in an hour shows %d skipped firings", n)
		}

		// The fleet is back: a Loop runs the job every second, each run
		// recording its next firing.
		g, err := jobguard.New(d.db, d.dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		every, err := jobguard.Every(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		lctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- g.Loop(lctx, jobguard.Job{Name: late, AtMost: time.Second}, every, func(context.Context) error { return nil })
		}()
		defer func() { stop(); <-done }()
		jsUntil(t, ctx, "the firing missed, a run since", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector(%q).innerText.includes("missed; a run began by")`, row, row))
		// Runs on time add no skipped firing: wait past the grace.
		before := jsInt(t, ctx, `Number(document.getElementById("live").dataset.refreshes || 0)`)
		jsUntil(t, ctx, "7s of refreshes", fmt.Sprintf(`Number(document.getElementById("live").dataset.refreshes || 0) >= %d`, before+7000/300))
		if n := jsInt(t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, row)); n != 1 {
			t.Errorf("%d skipped firings of %s, want 1: runs on time count as skipped", n, late)
		}
	})
}

// setDue writes job's next due as jobguard's Loop does.
func setDue(t *testing.T, d dbTarget, job string, at time.Time) {
	t.Helper()
	q := `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES (?, ?)`
	var arg any = at.UTC()
	switch d.dialect {
	case sqllock.Postgres:
		q = `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES ($1, $2)`
	case sqllock.SQLite:
		arg = at.UnixMicro()
	}
	if _, err := d.db.Exec(q, job, arg); err != nil {
		t.Fatal(err)
	}
}
