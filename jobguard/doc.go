// Package jobguard runs a scheduled job at most once per period across the
// replicas of a service: the ShedLock contract on sqllock's database clock
// and fencing tokens.
//
// Every replica runs the same scheduler loop, [Guard.Loop], with a
// [Schedule]: [Every] period (on the wall clock's boundaries, so replicas
// agree), or a [Cron] expression read in a time zone (robfig/cron's
// parser, the one Kubernetes CronJobs use). At each firing the first
// replica to arrive takes the job's row and runs it; the others skip.
// [Guard.Run] is one firing, for callers with a scheduler of their own.
// Two durations bound the row:
//
//   - AtMost (hold-at-most) is how long the row stays taken while the job
//     runs. A runner that crashes frees the job when it passes, so set it
//     well above the job's longest run. The job's context is cancelled a
//     safety margin (AtMost/10) before it, so an overrunning job is stopped
//     before another replica can start it, not run twice.
//   - AtLeast (hold-at-least) is how long the row stays taken after the job
//     started, even when it finished sooner. It absorbs replicas whose
//     schedules or clocks fire slightly apart: a replica firing late for the
//     same period finds the row still taken and skips. Set it above that
//     spread and below the period.
//
// A job whose runs have no known bound sets [Job.KeepAlive]: the run's
// hold is extended every AtMost/3 while it runs, so AtMost (short, say a
// minute) bounds how long a crashed runner keeps the job, and a run may
// last hours. An extension that keeps failing ends the run as lost before
// the row could expire, as for tablelock's renewals.
//
// A run that learns it will outlast its AtMost calls [Lease.Extend]: the
// job stays taken until at least that long from now (never shortened, by
// keep-alive or anything else), and the run's context ends a margin
// before the new expiry instead of the old one. A runner that dies keeps
// the job until the extended expiry.
//
// All times are compared on the database clock inside the statements; the
// clocks of the replicas only decide when they try, never who wins.
//
// Each run gets a fencing token from the shared sequence (migration 00001),
// issued by the statement that takes the row. Inside Run the token is on the
// context ([sqllock.TokenFrom]); hand it to the job's writes so that a runner
// paused past AtMost cannot overwrite the work of its successor.
//
// The row lives in the table sqllock_jobs (migration 00004, given the lock
// table's shape by 00007); [WithTable] names another table created with
// [CreateTable]. A job is a lock row of tablelock's kind that is never
// renewed and, once its run releases it, kept until AtLeast: one engine
// serves both. [Guard.List] shows the jobs taken now in tablelock's [Info]
// shape (Holds is 1 while a run holds its job, 0 once only AtLeast keeps
// it), and [Guard.ForceRelease] frees one for an operator, named by the
// token List showed.
//
// Skipping is the normal outcome for all but one replica, so [Guard.Run]
// reports it as ran == false with a nil error; [Guard.TryAcquire], for callers
// who manage the lease themselves, returns an error matching
// [sqllock.ErrNotAcquired] instead.
//
// A try whose context ends while its statement is in flight (a deadline, a
// shutdown) is told so at once, but its statement runs on, detached, under
// its own timeout: cancelling a statement does not stop the server from
// committing it. Whatever it took is given back at once, so the job is not
// left taken until AtMost by a run that never started. [Guard.Close] waits
// for those give-backs and closes the Guard's prepared statements; call it
// before the process exits. Tries after Close are refused with an error
// matching [sqllock.ErrClosed]; runs already under way can still release.
package jobguard
