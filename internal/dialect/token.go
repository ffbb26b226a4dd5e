package dialect

// PostgresToken is how every strategy draws a fencing token on PostgreSQL:
// the function of migration 00011, timeline << 40 | nextval of
// sqllock_fence_seq, so that a promoted standby's tokens are all larger
// than the old primary's even where its sequence stands lower. It is one
// function call inside the statement that holds the lock: no round trip.
const PostgresToken = "sqllock_next_token()"
