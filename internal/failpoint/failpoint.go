// Package failpoint kills the process at named points, for crash tests.
//
// Code marks a point with Hit("local.create.linked"). When the environment
// variable WORLDFS_FAILPOINT names that point, the process sends itself
// SIGKILL there: a real crash, with no deferred code, no flush and no
// cleanup. "name@N" crashes at the Nth hit instead of the first. Points
// cost one atomic load when no failpoint is set.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms a failpoint.
const Env = "WORLDFS_FAILPOINT"

var (
	armed atomic.Bool
	mu    sync.Mutex
	name  string
	at    int
	hits  int
)

func init() {
	if spec := os.Getenv(Env); spec != "" {
		if err := Arm(spec); err != nil {
			fmt.Fprintln(os.Stderr, "worldfs:", err)
			os.Exit(2)
		}
	}
}

// Arm sets the failpoint from a spec "name" or "name@N".
func Arm(spec string) error {
	n, count := spec, 1
	if i := strings.LastIndexByte(spec, '@'); i >= 0 {
		c, err := strconv.Atoi(spec[i+1:])
		if err != nil || c < 1 {
			return fmt.Errorf("failpoint %q: the count after @ must be a positive number", spec)
		}
		n, count = spec[:i], c
	}
	mu.Lock()
	defer mu.Unlock()
	name, at, hits = n, count, 0
	armed.Store(n != "")
	return nil
}

// Hit marks the point called point; it kills the process if that point is
// armed and this is the armed hit.
func Hit(point string) {
	if !armed.Load() {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if point != name {
		return
	}
	hits++
	if hits == at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not deliverable late; never return.
	}
}
