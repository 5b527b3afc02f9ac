package bucket

import (
	"testing"
	"time"
)

// The retries of one call wait more than a second in all, whatever is
// drawn (the least draw every time), so that a mutation GCS throttles (one
// a second per name) is tried again after the second has passed; and no
// single wait exceeds a second.
func TestBackoffSpansAMutationInterval(t *testing.T) {
	least := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	var total time.Duration
	for attempt := 1; attempt < MaxAttempts; attempt++ {
		total += backoff(attempt, least)
		if d := backoff(attempt, most); d > time.Second {
			t.Fatalf("retry %d waits up to %v", attempt, d)
		}
	}
	if total <= time.Second {
		t.Fatalf("%d attempts wait %v in all at the least draws; GCS allows one mutation of a name a second", MaxAttempts, total)
	}
}
