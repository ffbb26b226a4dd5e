// Package recipes holds the README's task recipes as code the test suite
// runs: a multi-item order (rowlock.LockRows in one transaction, through
// database/sql, sqlx and pgx; and tablelock with AcquireAll and a fence
// per item for work outside the database), and a long-running worker
// (sqllock.Hold with a claim on takeover). The nightly job in N replicas
// is examples/nightlyjob. Each recipe is a function of the _test.go files,
// run on PostgreSQL, MariaDB and (where the strategy serves it) SQLite.
package recipes
