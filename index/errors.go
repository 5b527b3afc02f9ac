package index

import (
	"errors"
	"fmt"
)

// StaleWriterError: a writer published under an epoch that is no longer the
// world's fence epoch. The writer must stop for good.
type StaleWriterError struct {
	World   string
	Held    int64 // the epoch the writer holds
	Current int64 // the world's fence epoch
}

func (e *StaleWriterError) Error() string {
	return fmt.Sprintf("world %s: stale writer: holds epoch %d, the fence is at epoch %d", e.World, e.Held, e.Current)
}

// CatalogConflictError: a different attempt already published this tick.
type CatalogConflictError struct {
	World, Run string
	Tick       int64
	Published  string // the token that is visible
	Attempted  string
}

func (e *CatalogConflictError) Error() string {
	return fmt.Sprintf("world %s run %s tick %d: already published by commit %s (this attempt: %s)",
		e.World, e.Run, e.Tick, e.Published, e.Attempted)
}

// ClaimConflictError: the fact's external id was claimed with another
// digest. Permanent.
type ClaimConflictError struct {
	World     string
	Key       ClaimKey
	Claimed   string // the digest on record
	Attempted string
}

func (e *ClaimConflictError) Error() string {
	return fmt.Sprintf("world %s: fact %s was claimed with digest %s, not %s", e.World, e.Key, e.Claimed, e.Attempted)
}

// ClaimPendingError: another holder's lease on the claim is still live.
type ClaimPendingError struct {
	World        string
	Key          ClaimKey
	Holder       string
	LeaseUntilMs int64
}

func (e *ClaimPendingError) Error() string {
	return fmt.Sprintf("world %s: fact %s is pending under %s's lease until %d ms", e.World, e.Key, e.Holder, e.LeaseUntilMs)
}

// Sentinels for refusals that carry no data worth a type.
var (
	// ErrNoWorld: the entry needs a created world.
	ErrNoWorld = errors.New("world does not exist")
	// ErrWorldExists: world.create on a created world.
	ErrWorldExists = errors.New("world already exists")
	// ErrRefused: the entry does not apply to the state (the message says
	// why).
	ErrRefused = errors.New("entry refused")
)

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}
