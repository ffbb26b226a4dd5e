package rowlease

// Prepared is how many statements t has prepared through database/sql.
func (t *Table) Prepared() int { return t.h.stmts.Len() }
