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
	"time"
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

// checkFlags refuses, before the flag package parses args, a flag the
// command does not have (suggesting the nearest it has) and a flag that
// takes a value given none, each as one line naming the flag. It walks
// args as the flag package does: a flag that takes a value takes the
// next argument (even one starting with a dash: --at -1m); "--" ends the
// flags.
func checkFlags(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if len(a) < 2 || a[0] != '-' || strings.HasPrefix(a, "---") {
			continue // a positional argument, or bad syntax the flag package names
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "" || name == "h" || name == "help" {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			msg := fmt.Sprintf("unknown flag --%s", name)
			if c := closest(name, names); c != "" {
				msg += fmt.Sprintf("; did you mean --%s?", c)
			}
			return errors.New(msg)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() || hasValue {
			continue
		}
		if i+1 >= len(args) {
			return fmt.Errorf("--%s needs a value", name)
		}
		i++
	}
	return nil
}

// watchValues wraps every flag of fs so that a value its flag refuses is
// kept as an error naming the flag and saying what it takes; it returns
// where the last one is kept.
func watchValues(fs *flag.FlagSet) *error {
	bad := new(error)
	fs.VisitAll(func(f *flag.Flag) { f.Value = watchedValue{Value: f.Value, name: f.Name, bad: bad} })
	return bad
}

// watchedValue is a flag's value that records why it refused a value.
type watchedValue struct {
	flag.Value
	name string
	bad  *error
}

func (v watchedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil {
		*v.bad = valueError(v.name, s, v.Value, err)
	}
	return err
}

func (v watchedValue) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return v.Value.String()
}

func (v watchedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// valueError says that flag name refused s: for the flag package's own
// kinds of value, what it takes (their errors say only "parse error");
// for worldfs's own values (sizes, timeouts), their error, which does.
func valueError(name, s string, v flag.Value, err error) error {
	g, ok := v.(flag.Getter)
	if !ok {
		return fmt.Errorf("--%s: %w", name, err)
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return fmt.Errorf("--%s: %s is out of range (or not a whole number)", name, s)
		}
		return fmt.Errorf("--%s: %q is not a whole number", name, s)
	case float64:
		return fmt.Errorf("--%s: %q is not a number", name, s)
	case bool:
		return fmt.Errorf("--%s: %q is not true or false (a bare --%s is true)", name, s, name)
	case time.Duration:
		return fmt.Errorf("--%s: %q is not a duration (e.g. 30s, 2m, 1h30m)", name, s)
	}
	return fmt.Errorf("--%s: %w", name, err)
}
