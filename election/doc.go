// Package election elects one leader per name among processes that share
// a database — etcd's concurrency.Election on PostgreSQL, MySQL/MariaDB
// and SQLite.
//
//	e, err := election.New(db, dialect, tablelock.WithTTL(10*time.Second))
//	defer e.Close()
//	lead, err := e.Campaign(ctx, "billing-scheduler", podName) // blocks until leading
//	defer lead.Resign(ctx)
//	select { case <-lead.Done(): /* lost: stop leading */ ... }
//
// A leadership is a tablelock lease on the key "sqllock.election/<name>"
// of the lock table: the leader renews it, learns of its loss on
// [Leadership.Done] a safety margin before anyone else could lead, and a
// leader that dies is replaced after the TTL. Its fencing token is the
// term ([Leadership.Term]): strictly larger for each new leader, drawn by
// the statement that wins the lease. Hand it to package fence, and a
// leader paused past its TTL cannot overwrite the work of its successor:
// its writes carry an older term and are refused.
//
// Each leadership also leaves a row in sqllock_elections (migration
// 00009): the term, the value the leader campaigned with, and since when
// (the database clock). [Election.Leader] reads the live leader (the row
// whose term is the live lease's token), or [ErrNoLeader].
// [Election.Observe] delivers every leadership from the current one on,
// in term order, each once, and since every term leaves a row, a
// leadership shorter than Observe's look is still delivered. It reads the
// live leader and the newest term in one statement, one snapshot, so a
// leader who takes office as Observe starts is delivered too. On
// PostgreSQL the statement that publishes a term also sends a NOTIFY (one
// per leadership, committed with the row), and Observe looks when it
// hears one, through the listening session the Election's campaigners
// already share; it also looks when that session is back after a failure,
// and every 10s in case an announcement went unheard. Elsewhere it polls
// every 100ms. Observe ends with its context or the Election's Close. The
// rows are a history; delete old terms when they no longer interest
// anyone.
//
// The value is stored as given or refused: one that is not UTF-8, holds
// a NUL byte or is longer than [MaxValue] bytes (what MySQL's TEXT holds)
// fails Campaign with sqllock.ErrInvalidOption before anything is
// written, and on MySQL and MariaDB the term's statement is strict
// whatever the session's sql_mode, so a value is never stored altered.
//
// Campaign blocks through tablelock's waiting: a resignation wakes a
// campaigner in the same process at once, and on PostgreSQL one anywhere
// (NOTIFY); elsewhere campaigners poll with backoff. Each call to Campaign
// is a campaigner of its own, whatever owner its context carries.
package election
