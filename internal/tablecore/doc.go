// Package tablecore is the Locker over a lock table, the one package
// tablelock and the primitives built on the lock table (election, rwlock,
// semaphore, jobguard) share: leases, their renewal, waiting, fair grants,
// gates and Close. Package tablelock wraps it thinly and documents it; the
// primitives call it directly, for what tablelock does not show its users
// (the listening session, the lock table, the telemetry options), with
// ordinary methods rather than hooks set at init.
//
// Its errors say "tablelock:", as the Locker they come from is one.
package tablecore
