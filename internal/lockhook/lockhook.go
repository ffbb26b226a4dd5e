// Package lockhook lets the packages built on tablelock reach parts of a
// *tablelock.Locker that are not its public API, without import cycles
// and without exporting them to users.
package lockhook

import (
	"github.com/sqllock/sqllock/internal/rowlease"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// Listener returns the listener of l, a *tablelock.Locker, or nil when it
// has none (a dialect that announces nothing, WithNotify(false), a
// transaction pooler). Package tablelock sets it at init.
var Listener func(l any) *rowlease.Listener

// Table returns the lock table of l, a *tablelock.Locker. Package
// tablelock sets it at init.
var Table func(l any) *rowlease.Table

// Telemetry returns the telemetry options of l, a *tablelock.Locker: a
// primitive built on it records on instruments of its own, made with the
// same providers. Package tablelock sets it at init.
var Telemetry func(l any) telemetry.Options
