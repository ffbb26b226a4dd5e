package fence

import (
	"testing"

	"github.com/sqllock/sqllock"

	"github.com/sqllock/sqllock/internal/testing/sqlscan"
)

// The MySQL path's statements use nothing MySQL 8 lacks (the scan's own
// test shows it catches what it looks for).
func TestCommonPathStatements(t *testing.T) {
	common, mariadb := commonStores()
	for _, q := range sqlscan.Strings(common) {
		if bad := sqlscan.MariaDBOnly(q); len(bad) > 0 {
			t.Errorf("the MySQL path uses %v, which MySQL 8 lacks:\n%s", bad, q)
		}
	}
	if mariadb == nil {
		return
	}
	caught := false
	for _, q := range sqlscan.Strings(mariadb) {
		caught = caught || len(sqlscan.MariaDBOnly(q)) > 0
	}
	if !caught {
		t.Error("the scan finds nothing MariaDB-only in the MariaDB store")
	}
}

// commonStores: both dialects share the fence's statements, so there is
// no MariaDB-only store to catch.
func commonStores() (common, mariadb any) {
	return stores[sqllock.MySQL]("`t`"), nil
}
