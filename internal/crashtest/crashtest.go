// Package crashtest runs a test function in a subprocess, the test binary
// run again, so that a test can kill it: at a failpoint (a real SIGKILL at a
// named point of the code, see internal/failpoint) or at a moment the test
// chooses.
//
// A test package names its child functions once, in TestMain:
//
//	func TestMain(m *testing.M) {
//		crashtest.Main(m, map[string]crashtest.Func{"writer": writerChild})
//	}
//
// and a test runs one, here killed at the third hit of a failpoint:
//
//	out := crashtest.KilledAt(t, "local.create.linked@3", "writer", dir, "100")
package crashtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/internal/failpoint"
)

// Environment of a child: which function it runs and its arguments (a
// JSON array of strings).
const (
	envFunc = "WORLDFS_CRASHTEST_FUNC"
	envArgs = "WORLDFS_CRASHTEST_ARGS"
)

// Func is a child function: it runs in the subprocess with the arguments
// the test gave, and its result is the process's exit code.
type Func func(args []string) int

// Main is a test package's TestMain: in a child process it runs the child
// function the environment names and exits with its result; otherwise it
// runs the tests.
func Main(m *testing.M, children map[string]Func) {
	if name := os.Getenv(envFunc); name != "" {
		if err := failpoint.EnvError(); err != nil {
			fmt.Fprintln(os.Stderr, "crashtest:", err)
			os.Exit(2)
		}
		f, ok := children[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "crashtest: this test binary has no child function %q\n", name)
			os.Exit(2)
		}
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
			fmt.Fprintf(os.Stderr, "crashtest: %s: %v\n", envArgs, err)
			os.Exit(2)
		}
		os.Exit(f(args))
	}
	os.Exit(m.Run())
}

// Command returns the command that runs child function name with args in
// this test binary. The caller may add to its Env (a failpoint: Failpoint)
// and set its outputs before it starts.
func Command(name string, args ...string) *exec.Cmd {
	return CommandOf(os.Args[0], name, args...)
}

// CommandOf is Command with another copy of the test binary (bin), for a
// child that must run from elsewhere (as another user, say).
func CommandOf(bin, name string, args ...string) *exec.Cmd {
	if args == nil {
		args = []string{}
	}
	js, _ := json.Marshal(args)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), envFunc+"="+name, envArgs+"="+string(js))
	return cmd
}

// Failpoint is the environment entry that arms failpoint spec ("name" or
// "name@N", the Nth hit) in a child.
func Failpoint(spec string) string { return failpoint.Env + "=" + spec }

// Hold arms failpoint spec ("name" or "name@N") in cmd as a hold in dir
// (failpoint.DirEnv): the child stops there until the test calls the
// returned release, after waiting for it to arrive with the returned
// wait.
func Hold(t testing.TB, cmd *exec.Cmd, spec, dir string) (wait func(), release func()) {
	t.Helper()
	point := spec
	if i := strings.LastIndexByte(point, '@'); i >= 0 {
		point = point[:i]
	}
	cmd.Env = append(cmd.Env, Failpoint(spec+"=hold"), failpoint.DirEnv+"="+dir)
	wait = func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Minute); ; {
			if _, err := os.Stat(filepath.Join(dir, point+".held")); err == nil {
				return
			}
			if cmd.ProcessState != nil || time.Now().After(deadline) {
				t.Fatalf("child did not reach failpoint %s: %v", spec, cmd.ProcessState)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	release = func() {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, point+".release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return wait, release
}

// Killed reports whether a finished command died of SIGKILL.
func Killed(cmd *exec.Cmd) bool {
	if cmd.ProcessState == nil {
		return false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// KilledAt runs child function name with args and failpoint spec armed,
// and fails the test unless the child died there (SIGKILL). It returns
// what the child printed on stdout.
func KilledAt(t testing.TB, spec, name string, args ...string) []byte {
	t.Helper()
	cmd := Command(name, args...)
	cmd.Env = append(cmd.Env, Failpoint(spec))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if !Killed(cmd) {
		t.Fatalf("child %s %q did not die at failpoint %s: %v\n%s", name, args, spec, cmd.ProcessState, stderr.Bytes())
	}
	return stdout.Bytes()
}

// Run runs child function name with args to its end and fails the test
// unless it exits 0. It returns what the child printed on stdout.
func Run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %s %q: %v\n%s", name, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// Proc is a running child whose stdout the test follows line by line, to
// kill it at a moment of the test's choosing once it is under way.
type Proc struct {
	Cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	first chan struct{} // closed at the first line
	done  chan struct{} // closed when stdout ends
}

// Start starts cmd (from Command; its stderr goes to the test's unless
// set) and follows its stdout. The child is killed when the test ends.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, first: make(chan struct{}), done: make(chan struct{})}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		_ = cmd.Wait()
	})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		var once sync.Once
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			once.Do(func() { close(p.first) })
		}
	}()
	return p
}

// FirstLine is closed when the child has printed its first line.
func (p *Proc) FirstLine() <-chan struct{} { return p.first }

// Kill kills the child with SIGKILL.
func (p *Proc) Kill() error { return p.Cmd.Process.Signal(syscall.SIGKILL) }

// Wait waits for the child to end and returns everything it printed on
// stdout and whether it died of SIGKILL.
func (p *Proc) Wait() (stdout []byte, killed bool) {
	<-p.done
	_ = p.Cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.out.Bytes()), Killed(p.Cmd)
}
