package advisory_test

import (
	"testing"

	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// Session checkers must end with their sessions.
func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }
