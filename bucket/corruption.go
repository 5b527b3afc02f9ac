package bucket

import "errors"

// ErrCorruption marks every error that says stored bytes are damaged: an
// object that differs from what the catalog records of it, a catalog slot,
// checkpoint or table description that does not parse, a tick index that
// contradicts its file. It is the one corruption marker of worldfs: the
// packages above mark their corruption with MarkCorruption (their own
// sentinels, index.ErrCorrupt and cache.ErrCorruptFragment, are marked
// errors), and the CLI and the mount map it in one place each. Test for it
// with errors.Is (or IsCorruption).
var ErrCorruption = errors.New("corruption")

// MarkCorruption returns err marked as corruption: its message and chain
// are err's, and errors.Is(_, ErrCorruption) holds. Nil stays nil.
func MarkCorruption(err error) error {
	if err == nil || errors.Is(err, ErrCorruption) {
		return err
	}
	return corruptionError{err}
}

// IsCorruption reports whether err is marked as corruption.
func IsCorruption(err error) bool { return errors.Is(err, ErrCorruption) }

type corruptionError struct{ err error }

func (e corruptionError) Error() string        { return e.err.Error() }
func (e corruptionError) Unwrap() error        { return e.err }
func (e corruptionError) Is(target error) bool { return target == ErrCorruption }
