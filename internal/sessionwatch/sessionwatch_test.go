package sessionwatch

import "testing"

// errorResponse builds a PostgreSQL ErrorResponse with the given fields.
func errorResponse(fields ...string) []byte {
	var body []byte
	for _, f := range fields {
		body = append(body, f...)
		body = append(body, 0)
	}
	body = append(body, 0)
	n := len(body) + 4
	return append([]byte{'E', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func TestFatal(t *testing.T) {
	terminate := errorResponse("SFATAL", "VFATAL", "C57P01", "Mterminating connection due to administrator command")
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"terminate", terminate, true},
		{"cut after V", terminate[:20], true},
		{"localized S, V fatal", errorResponse("SSCHWERWIEGEND", "VFATAL"), true},
		{"panic", errorResponse("SPANIC", "VPANIC"), true},
		{"no V (before 9.6)", errorResponse("SFATAL", "C57P01"), true},
		{"error", errorResponse("SERROR", "VERROR", "C40001"), false},
		{"notice", append([]byte{'N'}, terminate[1:]...), false},
		{"ready for query", []byte{'Z', 0, 0, 0, 5, 'I'}, false},
		{"short", []byte{'E', 0, 0}, false},
		{"bad length", []byte{'E', 0, 0, 0, 1, 'S', 'F'}, false},
		{"cut in S", terminate[:8], false},
		{"empty", nil, false},
	} {
		if got := fatal(tc.b); got != tc.want {
			t.Errorf("%s: fatal(%q) = %v, want %v", tc.name, tc.b, got, tc.want)
		}
	}
}
