package rowlock

import (
	"testing"

	"github.com/sqllock/sqllock/internal/testing/sqlscan"
)

// The MySQL path's statements use nothing MySQL 8 lacks. The MariaDB
// store, scanned the same way, is caught: the scan can fail.
func TestCommonPathStatements(t *testing.T) {
	common, mariadb := commonStores()
	for _, q := range sqlscan.Strings(common) {
		if bad := sqlscan.MariaDBOnly(q); len(bad) > 0 {
			t.Errorf("the MySQL path uses %v, which MySQL 8 lacks:\n%s", bad, q)
		}
	}
	caught := false
	for _, q := range sqlscan.Strings(mariadb) {
		caught = caught || len(sqlscan.MariaDBOnly(q)) > 0
	}
	if !caught {
		t.Error("the scan finds nothing MariaDB-only in the MariaDB store")
	}
}

func commonStores() (common, mariadb any) {
	texts := func(dl flavor) []any {
		return []any{dl.newStore("`sqllock_rows`", storeEnv{}), dl.tokenQuery(), dl.schema("`sqllock_rows`")}
	}
	return texts(mysqlCommonDialect{}), texts(mysqlDialect{})
}
