package election

import "time"

// SetSafetyPoll sets how often Observe polls while it hears announcements,
// so that a test can leave it only the announcements to go by.
func SetSafetyPoll(e *Election, d time.Duration) { e.safetyPoll = d }
