package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sizeValue is a byte count given with a unit: 10GiB, 512MiB, 2GB, 4096.
type sizeValue struct{ n *int64 }

// sizeFlag adds a size flag in bytes that takes units.
func sizeFlag(fs *flag.FlagSet, name string, def int64, usage string) *int64 {
	n := def
	fs.Var(sizeValue{&n}, name, usage+" (`size` with a unit: KiB, MiB, GiB, TiB, or KB, MB, GB, TB; bare: bytes)")
	return &n
}

func (v sizeValue) String() string {
	if v.n == nil {
		return ""
	}
	return formatSize(*v.n)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1},
}

// parseSize reads a non-negative size with an optional unit.
func parseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.n
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*float64(mult) > float64(1<<62) {
		return 0, fmt.Errorf("%q is not a size (e.g. 10GiB, 512MiB, 4096)", s)
	}
	return int64(f * float64(mult)), nil
}

// formatSize writes n in the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range sizeUnits[:4] {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// checkMountpoint refuses a mountpoint that cannot take a worldfs mount,
// saying what to do: a dead FUSE mount there, a live worldfs mount (which
// would be stacked on), a missing path or one that is not a directory.
func checkMountpoint(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("mount point %s: a dead FUSE mount is left there (its process is gone); run 'worldfs umount %s' first", dir, dir)
	case errors.Is(err, fs.ErrNotExist):
		return notFoundError{fmt.Sprintf("mount point %s does not exist (mkdir it first)", dir)}
	case err != nil:
		return fmt.Errorf("mount point %s: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("mount point %s is a %s, not a directory", dir, fileKind(info.Mode()))
	}
	if fstype, ok := mountedAt(dir); ok && strings.HasSuffix(fstype, "worldfs") {
		return fmt.Errorf("mount point %s: a worldfs mount is already live there; use it, or 'worldfs umount %s' first", dir, dir)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// mountedAt returns the file system type of the mount whose mount point is
// exactly dir, from /proc/self/mountinfo.
func mountedAt(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	fstype, found := "", false
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 1 {
			continue
		}
		if unescapeMountinfo(fields[4]) == abs {
			fstype, found = postFields[0], true // the last mount there is the visible one
		}
	}
	return fstype, found
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
