// Package sqlweb serves a live page of every hold kept in a database's
// lock tables: tablelock locks, jobguard jobs, semaphore permits, rwlock
// holds, election leaders and the advisory locks the server shows, with
// who holds each, its token, how long it has been held and how long it has
// left on the database's clock, the sessions waiting where the server
// shows them, the runs of each job and its skipped firings, the audit
// trail of force releases, and per key charts of the hold times and the
// waits of the last minutes.
//
// Mount it on an application's own mux, under a prefix that ends in a
// slash:
//
//	mux.Handle("/locks/", http.StripPrefix("/locks", sqlweb.Handler(db, sqllock.Postgres)))
//
// `sqllock web` serves the same handler on its own.
//
// The page is rendered on the server with html/template, so a key, owner
// or reason that holds markup shows as text; a small script embedded in
// the binary fetches the held rows again every refresh and swaps them in,
// without a reload. Every response carries a Content-Security-Policy that
// allows only this handler's own script and style sheet: no inline
// script, no other origin.
//
// # What it costs the database
//
// The handler reads the tables only when a page asks (no goroutine of its
// own), and at most once per half refresh interval however many pages are
// open. One refresh runs one statement per lock table (the tablelock
// table, the job table, the permit table), one per leader shown, one for
// the sizes of the semaphores shown, one for the next due of every job,
// one for the audit trail, and for what the server shows of advisory locks and
// waiters: on PostgreSQL one for pg_locks, two for the waiting and
// listening sessions and one for the queues the lock rows keep, on MySQL
// and MariaDB one for @@performance_schema and, where it is on, one for
// its locks. Measured with no leader: 9 statements on PostgreSQL, 6 on
// MariaDB (performance_schema off), 5 on SQLite.
//
// # Charts
//
// The charts come from what the handler itself sampled: each hold it saw
// is one point, at the time it began, as high as it was held when last
// seen. The library's OpenTelemetry metrics would say more about waits,
// but only inside the process that takes the locks, and only where the
// application installed a meter provider; the page watches every process
// of every application on the database, so it charts what the tables show.
// A hold shorter than the refresh interval may be missed.
//
// A job's firing that came due with no run shows as skipped: its next
// due, which jobguard's Loop records as each run begins, passed and no
// run recorded the next. How many later firings were missed too the page
// cannot know: jobguard keeps the next firing, not the schedule.
//
// Waits per key come from where the dialect keeps waiters by key: the
// queue of each lock row on PostgreSQL, the waiters of each key's gate on
// MariaDB where performance_schema shows them; MySQL's and SQLite's
// waiters poll and leave no trace. No queue entry says when its wait
// began, so a wait counts from the refresh that first saw it.
//
// # Forcing a release
//
// WithForce turns on a release button per hold, behind a token that the
// operator types with a reason. It frees the holder shown (not whoever
// holds the row by then) and writes the audit record that `sqllock locks
// release --force --reason` writes. Without WithForce the page is read
// only and refuses every release.
//
// WithBasicAuth puts every address behind HTTP basic auth; with
// WithForceByBasicAuth its credentials stand for the token. As a browser
// sends them with a form another site posts, a POST from another origin
// is always refused (http.CrossOriginProtection).
package sqlweb
