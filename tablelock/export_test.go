package tablelock

// BeforeRelisten makes l's listener call f each time it has lost its
// connection and is about to LISTEN again, widening the gap in which a
// release goes unheard.
func BeforeRelisten(l *Locker, f func()) { l.c.Listener().SetBeforeRelisten(f) }
