package server_test

// Defines -update, so that go test ./... -update, which rewrites the
// golden statement files of the packages that have them, runs here too.
import _ "github.com/sqllock/sqllock/internal/golden"
