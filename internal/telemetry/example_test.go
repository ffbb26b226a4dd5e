package telemetry_test

import (
	"fmt"

	"github.com/sqllock/sqllock/internal/telemetry"
)

// A loss's message maps to the bounded cause its metric carries: free
// text would make a time series per message.
func ExampleCause() {
	fmt.Println(telemetry.Cause("the row is no longer ours (expired, taken or deleted)"))
	fmt.Println(telemetry.Cause("not renewed before the safety margin"))
	fmt.Println(telemetry.Cause("the session holding it failed: EOF"))
	// Output:
	// taken
	// expired
	// session
}
