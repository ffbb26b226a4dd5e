package dialect

import "time"

// ToTime reads a timestamp column whatever the driver made of it: a
// time.Time (pgx; MySQL with parseTime), text (MySQL without it) or
// microseconds since the epoch (SQLite). It returns the time in UTC, and
// the zero time for NULL or anything it cannot read.
func ToTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case int64:
		return time.UnixMicro(t).UTC()
	case []byte:
		return parseTime(string(t))
	case string:
		return parseTime(t)
	}
	return time.Time{}
}

func parseTime(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05.999999", s)
	if err != nil {
		return time.Time{}
	}
	return t
}
