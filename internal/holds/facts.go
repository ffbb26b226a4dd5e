package holds

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/semaphore"
)

// addFacts fills what the lock rows cannot say from the tables of
// migration 00017: Of for a semaphore's permits (semaphore.SizesTable),
// NextDue for a job (jobguard.ScheduleTable). One statement per table, for
// the names listed only; with AllDue, the schedule's for every job, into
// Due. A database below 00017 shows neither.
func (s *Source) addFacts(ctx context.Context, rows []Row) error {
	var keys, jobs []string
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Kind+"\x00"+r.Key] {
			continue
		}
		seen[r.Kind+"\x00"+r.Key] = true
		switch r.Kind {
		case Semaphore:
			keys = append(keys, r.Key)
		case Job:
			jobs = append(jobs, r.Key)
		}
	}
	sizes, err := s.facts(ctx, semaphore.SizesTable, "sem_key", "permits", keys, false)
	if err != nil {
		return err
	}
	due, err := s.facts(ctx, jobguard.ScheduleTable, "job_name", dueMicros[s.Dialect], jobs, s.AllDue)
	if err != nil {
		return err
	}
	if s.AllDue {
		s.Due = make(map[string]time.Time, len(due))
		for n, us := range due {
			s.Due[n] = time.UnixMicro(us).UTC()
		}
	}
	for i := range rows {
		r := &rows[i]
		switch r.Kind {
		case Semaphore:
			r.Of = int(sizes[r.Key])
		case Job:
			if us, ok := due[r.Key]; ok {
				r.NextDue = time.UnixMicro(us).UTC()
			}
		}
	}
	return nil
}

// dueMicros reads sqllock_job_schedule.next_due as microseconds since the
// Unix epoch, whatever the session's time zone.
var dueMicros = map[sqllock.Dialect]string{
	sqllock.Postgres: `(extract(epoch FROM next_due) * 1000000)::bigint`,
	sqllock.MariaDB:  `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', next_due)`,
	sqllock.MySQL:    `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', next_due)`,
	sqllock.SQLite:   `next_due`,
}

// facts reads column value of table by its name column for names (all:
// for every name in table): the table and column names are this
// package's constants, never input.
func (s *Source) facts(ctx context.Context, table, name, value string, names []string, all bool) (map[string]int64, error) {
	out := map[string]int64{}
	if (len(names) == 0 && !all) || value == "" {
		return out, nil
	}
	if all {
		names = nil
	}
	marks := make([]string, len(names))
	args := make([]any, len(names))
	for i, n := range names {
		marks[i] = dialect.Of(s.Dialect).Param(i + 1)
		args[i] = n
	}
	q := "SELECT " + name + ", " + value + " FROM " + table
	if !all {
		q += " WHERE " + name + " IN (" + strings.Join(marks, ", ") + ")"
	}
	rows, err := s.DB.QueryContext(ctx, q, args...)
	if err != nil {
		if ok, terr := TableExists(ctx, s.DB, s.Dialect, table); terr == nil && !ok {
			return out, nil // below migration 00017
		}
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var v sql.NullInt64
		if err := rows.Scan(&n, &v); err != nil {
			return nil, err
		}
		if v.Valid {
			out[n] = v.Int64
		}
	}
	return out, rows.Err()
}
