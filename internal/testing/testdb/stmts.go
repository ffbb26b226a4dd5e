package testdb

import (
	"database/sql"
	"testing"
)

// SessionStatements returns how many server-side prepared statements the
// one MariaDB session behind db holds open (Com_stmt_prepare minus
// Com_stmt_close of that session, not the server's: other clients share
// it), and that session's id. db must be limited to one connection
// (SetMaxOpenConns(1)); a caller compares the ids of two readings to know
// they counted the same session.
func SessionStatements(t testing.TB, db *sql.DB) (open, session int64) {
	t.Helper()
	const q = `SELECT CONNECTION_ID(),
	CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_STMT_PREPARE') AS SIGNED) -
	CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_STMT_CLOSE') AS SIGNED)`
	if st := db.Stats(); st.MaxOpenConnections != 1 {
		t.Fatalf("SessionStatements needs a handle of one connection, not %d", st.MaxOpenConnections)
	}
	if err := db.QueryRow(q).Scan(&session, &open); err != nil {
		t.Fatal(err)
	}
	return open, session
}
