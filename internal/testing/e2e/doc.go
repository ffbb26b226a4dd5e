// Package e2e holds the module's end-to-end tests across strategies, and
// nothing else: a database restarting, failing over or cut off by the
// network (restart, failover, network), a Galera cluster, a MySQL-path
// holder killed mid-take, a holder paused past its lease and then fenced.
// They run against real servers, several in CI steps of their own, and
// they are kept apart from the root package so that its tests are the
// contract's.
package e2e
