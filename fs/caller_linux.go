package fs

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// openAs opens path as uid/gid with groups, on an OS thread of its own.
//
// Linux keeps credentials per thread, and setfsuid, setfsgid and the raw
// setgroups system call change only the calling thread's (Go's
// syscall.Setgroups would change every thread's). The goroutine locks its
// thread and never unlocks it, so the runtime ends the thread with the
// goroutine: no other goroutine ever runs with the caller's identity, and
// threads the runtime starts meanwhile are cloned from its template
// thread, not from this one. Dropping the file-system uid to a non-zero
// one also drops the capabilities that bypass file permissions.
func openAs(path string, uid, gid uint32, groups []uint32) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		fd, err := -1, becomeCaller(uid, gid, groups)
		if err == nil {
			fd, err = openRegular(path)
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// becomeCaller switches the calling thread's supplementary groups and
// file-system ids; it fails unless each switch took.
func becomeCaller(uid, gid uint32, groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("taking the writer's groups: %w", e)
	}
	// setfsgid and setfsuid return the previous id and cannot fail
	// visibly: a second call reads back what the first did.
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	if got, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0); uint32(got) != gid {
		return fmt.Errorf("taking the writer's gid %d: still %d", gid, got)
	}
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	if got, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0); uint32(got) != uid {
		return fmt.Errorf("taking the writer's uid %d: still %d", uid, got)
	}
	return nil
}

// callerGroups returns the supplementary groups of the thread pid (the
// FUSE request's), from /proc. When they cannot be read (the caller is in
// another pid namespace, or gone) it returns none: fewer rights, never
// more.
func callerGroups(pid uint32) []uint32 {
	if pid == 0 {
		return nil
	}
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var out []uint32
		for _, g := range strings.Fields(rest) {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return nil
			}
			out = append(out, uint32(n))
		}
		return out
	}
	return nil
}

// callerProcess returns the process (thread group) of the thread tid (the
// FUSE request's, which for a program of several threads is not the
// process id its user knows), from /proc; tid itself when it cannot be
// read.
func callerProcess(tid uint32) uint32 {
	if tid == 0 {
		return 0
	}
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return tid
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 32); err == nil {
				return uint32(n)
			}
			break
		}
	}
	return tid
}
