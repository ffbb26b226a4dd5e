package tablelock_test

import (
	"testing"

	"github.com/sqllock/sqllock/internal/tablecore"
	"github.com/sqllock/sqllock/tablelock"
)

// TestCoreDefaults: the defaults the core applies are the ones this
// package documents as constants.
func TestCoreDefaults(t *testing.T) {
	c := tablecore.Defaults()
	if c.Table != tablelock.DefaultTable || c.TTL != tablelock.DefaultTTL ||
		c.Bound != tablelock.DefaultWaitBound || c.Claim != tablelock.DefaultClaimWindow {
		t.Errorf("tablecore.Defaults() = table %q, TTL %v, wait bound %v, claim window %v; tablelock documents %q, %v, %v, %v",
			c.Table, c.TTL, c.Bound, c.Claim, tablelock.DefaultTable, tablelock.DefaultTTL, tablelock.DefaultWaitBound, tablelock.DefaultClaimWindow)
	}
}
