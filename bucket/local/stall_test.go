package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
)

// within runs f and fails the test if it has not returned after a generous
// bound: a call that would wait forever fails here instead of hanging.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waiting after 30s: a call to a file system that hangs must give up on its own", what)
		return nil
	}
}

// A read that hangs in the kernel (open(2) of a FIFO no writer opens blocks
// until one does) gives up after the timeout with ErrUnavailable.
func TestHungRead(t *testing.T) {
	dir := t.TempDir()
	b, err := local.OpenWith(dir, local.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "stuck")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Unblock the abandoned opens when the test ends.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	ctx := context.Background()
	for what, call := range map[string]func() error{
		"Get":      func() error { _, _, err := b.Get(ctx, "stuck"); return err },
		"GetRange": func() error { _, err := b.GetRange(ctx, "stuck", 0, 1); return err },
	} {
		err := within(t, what, call)
		var noReply *bucket.NotAnsweringError
		if !errors.Is(err, bucket.ErrUnavailable) || !errors.As(err, &noReply) || noReply.Op != "get" || noReply.Bucket != b.Root() {
			t.Errorf("%s of a name whose open hangs = %v, want ErrUnavailable as a NotAnsweringError", what, err)
		}
	}
}

// A delete that hangs before its commit point (here in flock(2), held by
// another open of the lock file) gives up after the timeout, and says that
// it changed nothing: ErrUnavailable, not ErrAmbiguous.
func TestHungDeleteChangedNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := local.OpenWith(dir, local.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := b.Create(ctx, "kept", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, bucket.ReservedPrefix, "delete.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	err = within(t, "Delete", func() error { return b.Delete(ctx, "kept", a.Generation) })
	var noReply *bucket.NotAnsweringError
	if !errors.As(err, &noReply) || !noReply.Unapplied || errors.Is(err, bucket.ErrAmbiguous) || !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("Delete stuck on the lock = %v, want an unapplied NotAnsweringError", err)
	}
	// DeleteOnce does not wait the deadline out a dozen times either.
	err = within(t, "DeleteOnce", func() error { return bucket.DeleteOnce(ctx, b, "kept", a.Generation) })
	if !errors.As(err, &noReply) {
		t.Fatalf("DeleteOnce stuck on the lock = %v, want a NotAnsweringError", err)
	}
}
