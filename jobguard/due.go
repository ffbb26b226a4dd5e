package jobguard

import (
	"context"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
)

// ScheduleTable is where Loop records when each job next fires (migration
// 00017), so that operators' tools can show it: the job row says only
// when the last run began and until when it keeps the job.
const ScheduleTable = "sqllock_job_schedule"

// dueSQL records a job's next firing, on each dialect: a time on
// PostgreSQL and MySQL (UTC there), microseconds since the Unix epoch on
// SQLite, as the lock tables keep times.
var dueSQL = map[sqllock.Dialect]string{
	sqllock.Postgres: `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES ($1, $2)
ON CONFLICT (job_name) DO UPDATE SET next_due = EXCLUDED.next_due`,
	sqllock.MariaDB: `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES (?, ?)
ON DUPLICATE KEY UPDATE next_due = VALUES(next_due)`,
	sqllock.MySQL: `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES (?, ?)
ON DUPLICATE KEY UPDATE next_due = VALUES(next_due)`,
	sqllock.SQLite: `INSERT INTO sqllock_job_schedule (job_name, next_due) VALUES (?1, ?2)
ON CONFLICT (job_name) DO UPDATE SET next_due = excluded.next_due`,
}

// dueTimeout bounds the write of a next firing.
const dueTimeout = 5 * time.Second

// recordDue writes that job next fires at at: one statement per run, by
// the replica running it. A failure (a database below migration 00017)
// only leaves the time unshown; it is not the run's.
func (g *Guard) recordDue(ctx context.Context, job string, at time.Time) {
	q, ok := dueSQL[g.dialect]
	if !ok {
		return
	}
	var arg any = at.UTC()
	if dialect.Of(g.dialect).TimeMicros {
		arg = at.UnixMicro()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dueTimeout)
	defer cancel()
	_, _ = g.db.ExecContext(ctx, q, job, arg)
}
