package locktable

import (
	"sync"
	"time"
)

// seenRows remembers, per key, when a store's take last found its row and
// when one was last refused (or, on PostgreSQL, a release found the key
// waited for), so that only a quiet key tries the plain update of a free
// row first (the MariaDB and PostgreSQL stores), and on PostgreSQL the
// release that assumes nobody waits. The row of a key taken for the first
// time, or deleted by the reaper since, is absent; a key refused lately is
// likely held again when tried (a hot key): for both the update would cost
// a round trip for nothing, before the upsert.
type seenRows struct {
	mu sync.Mutex
	at map[string]seenRow
}

type seenRow struct{ seen, refused time.Time }

const (
	seenFor  = time.Minute // the reaper deletes a row only once expired for its grace (5 s by default)
	quietFor = time.Second // since the key's last refusal
	seenKeys = 4096
)

// saw records a take that found key's row, refused or not (refused also
// stands for a release that found the key waited for).
func (r *seenRows) saw(key string, refused bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) >= seenKeys {
		for k, e := range r.at {
			if now.Sub(e.seen) > seenFor {
				delete(r.at, k)
			}
		}
		if len(r.at) > seenKeys/2 { // too many live keys to sweep again soon
			r.at = nil
		}
	}
	if r.at == nil {
		r.at = make(map[string]seenRow)
	}
	e := r.at[key]
	e.seen = now
	if refused {
		e.refused = now
	}
	r.at[key] = e
}

// quiet reports whether key's row was found lately and no take of it was
// refused within quietFor.
func (r *seenRows) quiet(key string) bool {
	r.mu.Lock()
	e, ok := r.at[key]
	r.mu.Unlock()
	return ok && time.Since(e.seen) <= seenFor && time.Since(e.refused) > quietFor
}

// refusedLately reports whether a take of key was refused within quietFor.
func (r *seenRows) refusedLately(key string) bool {
	r.mu.Lock()
	e, ok := r.at[key]
	r.mu.Unlock()
	return ok && time.Since(e.refused) <= quietFor
}
