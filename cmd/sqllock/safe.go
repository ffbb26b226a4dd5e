package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// safe returns s fit for an operator's terminal: as it is when every
// character prints, else the whole value Go-quoted ("a\x1b[2Jb"), so that
// no control character (C0, DEL, C1), invalid UTF-8 or invisible format
// character of a key, owner, host, reason or query reaches the screen,
// and a value cannot end a line or a column and forge another. Every
// value read from the database goes through it before a table or message
// prints it; --json escapes by itself.
func safe(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// stampLayout is the one form of every instant the command prints: RFC
// 3339 to the millisecond, in UTC.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// stamp formats an instant as every output shows it; "-" when unknown.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(stampLayout)
}

// span formats a duration as every output shows it: to the millisecond.
func span(d time.Duration) string { return d.Round(time.Millisecond).String() }

// escapeControls shows each character of s that safe would quote as its
// Go escape (\x1b, \u009b), leaving the rest as it is: for a message of
// ours that quotes values it did not make safe, as a driver's error does.
func escapeControls(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r != utf8.RuneError && !strconv.IsPrint(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
