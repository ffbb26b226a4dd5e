package semaphore

import (
	"context"
	"time"

	"github.com/sqllock/sqllock"
)

// SizesTable is where a Semaphore records how many permits each key has
// (migration 00017), so that operators' tools can show "permit 2 of 3":
// the permit rows themselves say only which slot they are.
const SizesTable = "sqllock_semaphore_sizes"

// declareSQL records a key's permit count, on each dialect.
var declareSQL = map[sqllock.Dialect]string{
	sqllock.Postgres: `INSERT INTO sqllock_semaphore_sizes (sem_key, permits) VALUES ($1, $2)
ON CONFLICT (sem_key) DO UPDATE SET permits = EXCLUDED.permits`,
	sqllock.MariaDB: `INSERT INTO sqllock_semaphore_sizes (sem_key, permits) VALUES (?, ?)
ON DUPLICATE KEY UPDATE permits = VALUES(permits)`,
	sqllock.MySQL: `INSERT INTO sqllock_semaphore_sizes (sem_key, permits) VALUES (?, ?)
ON DUPLICATE KEY UPDATE permits = VALUES(permits)`,
	sqllock.SQLite: `INSERT INTO sqllock_semaphore_sizes (sem_key, permits) VALUES (?1, ?2)
ON CONFLICT (sem_key) DO UPDATE SET permits = excluded.permits`,
}

// maxDeclared bounds the keys a Semaphore remembers having declared; past
// it, it forgets them all and declares each again once.
const maxDeclared = 10000

// declareTimeout bounds the write of a permit count.
const declareTimeout = 5 * time.Second

// declare records that key has permits permits, once per key and count in
// this Semaphore: one statement on the first permit a key gets here, none
// after. A failure (a database below migration 00017) only leaves the
// count unshown; it is not the caller's.
func (s *Semaphore) declare(ctx context.Context, key string, permits int) {
	q, ok := declareSQL[s.dialect]
	if !ok {
		return
	}
	s.mu.Lock()
	if n, ok := s.declared[key]; ok && n == permits {
		s.mu.Unlock()
		return
	}
	if len(s.declared) >= maxDeclared {
		clear(s.declared)
	}
	s.declared[key] = permits
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), declareTimeout)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, q, key, permits)
}
