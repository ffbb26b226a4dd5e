// Package recipes holds the task recipes of docs/recipes.md as code the test suite
// runs: a multi-item order (rowlock.LockRows in one transaction, through
// database/sql, sqlx and pgx; and tablelock with AcquireAll and a fence
// per item for work outside the database), a long-running worker
// (sqllock.Hold with a claim on takeover), and writes to an HTTP service
// or object store fenced by token (a Fencing-Token header the service
// checks, or the token kept in the object with a conditional write; see
// docs/fencing.md). The nightly job in N replicas
// is examples/nightlyjob. Each recipe is a function of the _test.go files,
// run on PostgreSQL, MariaDB and (where the strategy serves it) SQLite.
package recipes
