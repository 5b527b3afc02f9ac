// Package failpoint stops the process at named points, for crash and race
// tests.
//
// Code marks a point with Hit("local.create.linked"). When the environment
// variable WORLDFS_FAILPOINT names that point, the process sends itself
// SIGKILL there: a real crash, with no deferred code, no flush and no
// cleanup. "name@N" crashes at the Nth hit instead of the first.
// "name=hold" (or "name@N=hold") holds the process there instead: it
// creates <name>.held in the directory WORLDFS_FAILPOINT_DIR names, then
// waits until <name>.release appears there and goes on, so that a test
// can run something else at exactly that point (a collection while a
// compaction's files wait for their entry). Points cost one atomic load
// when no failpoint is set.
//
// A malformed WORLDFS_FAILPOINT arms nothing; EnvError reports it, and a
// program that runs failpoints (worldfs, a crash test's child) refuses to
// start with it.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Env is the environment variable that arms a failpoint; DirEnv names the
// directory a held failpoint signals through.
const (
	Env    = "WORLDFS_FAILPOINT"
	DirEnv = "WORLDFS_FAILPOINT_DIR"
)

var (
	armed  atomic.Bool
	mu     sync.Mutex
	name   string
	at     int
	hits   int
	hold   string // the directory of a held failpoint ("": kill)
	envErr error
)

func init() {
	if spec := os.Getenv(Env); spec != "" {
		envErr = Arm(spec)
	}
}

// EnvError returns what is wrong with the failpoint the environment
// arms (nil: nothing, or a valid one).
func EnvError() error { return envErr }

// Arm sets the failpoint from a spec "name", "name@N", "name=hold" or
// "name@N=hold" (a hold needs WORLDFS_FAILPOINT_DIR).
func Arm(spec string) error {
	n, action, _ := strings.Cut(spec, "=")
	count := 1
	if i := strings.LastIndexByte(n, '@'); i >= 0 {
		c, err := strconv.Atoi(n[i+1:])
		if err != nil || c < 1 {
			return fmt.Errorf("%s=%q: the count after @ must be a positive number", Env, spec)
		}
		n, count = n[:i], c
	}
	dir := ""
	switch action {
	case "", "kill":
	case "hold":
		if dir = os.Getenv(DirEnv); dir == "" {
			return fmt.Errorf("%s=%q holds the process, and needs %s to name the directory it signals through", Env, spec, DirEnv)
		}
	default:
		return fmt.Errorf("%s=%q: the action after = is kill or hold, not %q", Env, spec, action)
	}
	mu.Lock()
	defer mu.Unlock()
	name, at, hits, hold = n, count, 0, dir
	armed.Store(n != "")
	return nil
}

// Hit marks the point called point; it kills (or holds) the process if
// that point is armed and this is the armed hit.
func Hit(point string) {
	if !armed.Load() {
		return
	}
	mu.Lock()
	if point != name {
		mu.Unlock()
		return
	}
	hits++
	if hits != at {
		mu.Unlock()
		return
	}
	dir := hold
	if dir == "" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never return.
	}
	mu.Unlock()
	held(dir, point)
}

// held signals that the process holds at point and waits for its
// release. A failure to signal is fatal: the test waiting for it would
// wait forever.
func held(dir, point string) {
	if err := os.WriteFile(filepath.Join(dir, point+".held"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "failpoint:", err)
		os.Exit(2)
	}
	release := filepath.Join(dir, point+".release")
	for {
		if _, err := os.Stat(release); !errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
