package fs

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

func TestErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{fmt.Errorf("lookup: %w", context.Canceled), syscall.EINTR},
		{badf("x"), syscall.EINVAL},
		{fmt.Errorf("w: %w", engine.ErrInvalid), syscall.EINVAL},
		{fmt.Errorf("w: %w", engine.ErrForbidden), syscall.EACCES},
		{&index.StaleWriterError{}, syscall.ESTALE},
		{&index.CatalogConflictError{}, syscall.EEXIST},
		{&index.ClaimConflictError{}, syscall.EEXIST},
		{&index.ClaimPendingError{}, syscall.EAGAIN},
		{fmt.Errorf("w: %w", index.ErrNoWorld), syscall.ENOENT},
		{fmt.Errorf("x: %w", bucket.ErrUnavailable), syscall.EIO},
		{fmt.Errorf("x: %w", index.ErrCorrupt), syscall.EIO},
		// A fragment that differs from its record is EIO, even when the
		// read that found it also says the object is gone.
		{fmt.Errorf("open: %w: %w", &cache.CorruptFragmentError{Name: index.FragmentPath("w", index.DefaultRun, "t", "tok", 0), What: "presence"}, bucket.ErrNotExist), syscall.EIO},
		// Any corruption (the one marker, bucket.ErrCorruption) is EIO
		// first: a damaged catalog or data file, whatever else it says.
		{fmt.Errorf("slot: %w: %w", index.ErrCorrupt, bucket.ErrNotExist), syscall.EIO},
		{fmt.Errorf("tick index: %w: %w", bucket.MarkCorruption(fmt.Errorf("rows out of order")), index.ErrNoWorld), syscall.EIO},
	} {
		if got := Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
