package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfs/worldfs/internal/crashtest"
	"github.com/worldfs/worldfs/internal/realpart"
)

func TestMain(m *testing.M) {
	// Called by the name worldfs (TestQuickStart puts a link of that name
	// to this test binary on PATH), the test binary is the command.
	if filepath.Base(os.Args[0]) == "worldfs" {
		main()
	}
	crashtest.Main(m, map[string]crashtest.Func{"mount": mountChild, "cli": cliChild})
}

// mountChild runs 'worldfs mount' in a process of its own, for a test to
// kill it.
func mountChild(args []string) int {
	return run(context.Background(), append([]string{"mount"}, args...), os.Stdout, os.Stderr)
}

// A mount whose process was killed leaves "transport endpoint is not
// connected" at its mountpoint; mounting there again fails, exit 1, and
// says to run 'worldfs umount'.
func TestMountOnADeadMountpoint(t *testing.T) {
	realpart.FUSE(t, true)
	bdir, mnt := t.TempDir(), t.TempDir()
	if code, _, stderr := cli(t, "init", "--bucket", bdir); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	p := crashtest.Start(t, crashtest.Command("mount", "--bucket", bdir, mnt))
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	select {
	case <-p.FirstLine():
	case <-exited:
		t.Fatal("the mount child exited before mounting")
	}
	t.Cleanup(func() {
		// A lazy unmount detaches the dead mount however it was left.
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			exec.Command("fusermount3", "-uz", mnt).Run()
		}
	})
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the dead mountpoint: %v; want transport endpoint is not connected", err)
	}
	code, _, stderr := cli(t, "mount", "--bucket", bdir, mnt)
	want := "a dead FUSE mount is left there (its process is gone); run 'worldfs umount " + mnt + "' first"
	if code != exitFailed || !strings.Contains(stderr, want) {
		t.Fatalf("mount on a dead mountpoint: exit %d, stderr %q; want exit %d and %q", code, stderr, exitFailed, want)
	}
}
