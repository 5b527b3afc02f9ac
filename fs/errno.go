package fs

import (
	"context"
	"errors"
	"log"
	"syscall"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// ErrBadCommand: a ctl command that is not well formed or names what does
// not fit (EINVAL). Nothing was committed.
var ErrBadCommand = errors.New("bad command")

// ErrNoWriter: a world ctl command that needs this mount to hold the
// world's writer, which it does not (EINVAL): create, fork or resume the
// world through the root ctl first.
var ErrNoWriter = errors.New("this mount holds no writer for the world")

// Errno maps an error to the errno the mount returns for it: the one place
// errors become errnos.
//
//	EINVAL  a malformed or unfitting command (ErrBadCommand, ErrNoWriter, a refused entry,
//	        a fact or evaluation engine.ErrInvalid refuses)
//	EACCES  the mount's role may not write facts (engine.ErrForbidden); the
//	        command names a file its writer may not read (ErrCallerAccess)
//	ESTALE  a stale writer (index.StaleWriterError)
//	EEXIST  a conflict: the tick, fact or tag name is taken, the world exists
//	EAGAIN  a claim is pending under another holder
//	ENOENT  the world, or the tick or tag named, does not exist
//	EINTR   the request was interrupted (its context canceled)
//	EIO     storage, a read past Options.ReadTimeout (ReadTimeoutError), corruption (bucket.ErrCorruption, first, whatever
//	        else the error says: a fragment that differs from its catalog record, even when it is missing; a damaged
//	        catalog, table description or tick index), anything else
func Errno(err error) syscall.Errno {
	var stale *index.StaleWriterError
	var conflict *index.CatalogConflictError
	var claimConflict *index.ClaimConflictError
	var pending *index.ClaimPendingError
	var tagTaken *index.TagExistsError
	switch {
	case err == nil:
		return 0
	case bucket.IsCorruption(err):
		return syscall.EIO
	case errors.Is(err, context.Canceled):
		// The kernel interrupted the request (a signal reached the
		// caller): EINTR, which Go's runtime retries and a C caller may.
		return syscall.EINTR
	case errors.Is(err, ErrBadCommand), errors.Is(err, ErrNoWriter), errors.Is(err, index.ErrRefused),
		errors.Is(err, engine.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, engine.ErrForbidden), errors.Is(err, ErrCallerAccess):
		return syscall.EACCES
	case errors.As(err, &stale):
		return syscall.ESTALE
	case errors.As(err, &conflict), errors.As(err, &claimConflict), errors.Is(err, index.ErrWorldExists),
		errors.Is(err, bucket.ErrExist), errors.As(err, &tagTaken):
		return syscall.EEXIST
	case errors.As(err, &pending):
		return syscall.EAGAIN
	case errors.Is(err, index.ErrNoWorld), errors.Is(err, bucket.ErrNotExist), errors.Is(err, index.ErrNotFound):
		return syscall.ENOENT
	}
	return syscall.EIO
}

// errno maps an error met while serving a read and logs what is not a
// plain absence, so that an EIO can be explained.
func (m *Mount) errno(what string, err error) syscall.Errno {
	e := Errno(err)
	switch {
	case bucket.IsCorruption(err):
		log.Printf("worldfs: %s: damaged data (worldfs check --read-data lists it): %v", what, err)
	case e != syscall.ENOENT && e != syscall.EINTR:
		log.Printf("worldfs: %s: %v", what, err)
	}
	return e
}
