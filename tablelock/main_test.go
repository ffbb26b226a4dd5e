package tablelock_test

import (
	"testing"

	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }
