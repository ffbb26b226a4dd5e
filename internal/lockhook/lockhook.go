// Package lockhook lets package semaphore reach the telemetry options of a
// *tablelock.Locker, which are not its public API, without exporting them
// to users. Election and rwlock hold an internal/tablecore.Locker and ask
// it; semaphore is to do the same, and then this package goes.
package lockhook

import "github.com/sqllock/sqllock/internal/telemetry"

// Telemetry returns the telemetry options of l, a *tablelock.Locker: a
// primitive built on it records on instruments of its own, made with the
// same providers. Package tablelock sets it at init.
var Telemetry func(l any) telemetry.Options
