// Package lockhook lets the packages built on tablelock reach parts of a
// *tablelock.Locker that are not its public API, without import cycles
// and without exporting them to users.
package lockhook

import "github.com/sqllock/sqllock/internal/rowlease"

// Listener returns the listener of l, a *tablelock.Locker, or nil when it
// has none (a dialect that announces nothing, WithNotify(false), a
// transaction pooler). Package tablelock sets it at init.
var Listener func(l any) *rowlease.Listener

// Table returns the lock table of l, a *tablelock.Locker. Package
// tablelock sets it at init.
var Table func(l any) *rowlease.Table
