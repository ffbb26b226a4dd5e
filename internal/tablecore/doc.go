// Package tablecore is the Locker over a lock table: leases, their
// renewal, waiting, fair grants, gates and Close. Package tablelock wraps
// it thinly and documents it for users; election, rwlock and semaphore
// hold one of their own and ask it, with ordinary methods rather than
// hooks set at init, for what tablelock does not show its users (the
// listening session, the lock table, the telemetry options). jobguard
// runs the lock table's engine (internal/locktable) directly.
//
// Its errors say "tablelock:", as the Locker they come from is one.
package tablecore
