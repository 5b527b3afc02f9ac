package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	wsql "github.com/worldfs/worldfs/sql"
)

// ErrCallerAccess: a command named a file its writer may not read
// (EACCES). The mount reads such files only with the writer's own rights.
var ErrCallerAccess = errors.New("the command's writer may not read this file")

// readRowsAsCaller reads the rows of the .parquet or .jsonl file at path
// for a ctl command, with the rights of the process whose write carries
// the command: the file is opened as that process (openAsCaller), copied
// from the open file into a private temporary file, and read from there.
// A file the writer may not open is ErrCallerAccess; any other failure is
// ErrBadCommand naming the path.
func readRowsAsCaller(ctx context.Context, path string) ([]map[string]any, error) {
	f, err := openAsCaller(ctx, path)
	if errors.Is(err, ErrCallerAccess) {
		return nil, err
	} else if err != nil {
		return nil, badf("%s: %v", path, err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp("", "worldfs-ctl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The copy keeps the name, so the format is chosen by its extension.
	cp := filepath.Join(dir, filepath.Base(path))
	out, err := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(out, f)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, badf("%s: %v", path, err)
	}
	rows, err := wsql.ReadRows(ctx, cp)
	if err != nil {
		return nil, badf("%s: %v", path, err)
	}
	return rows, nil
}

// openAsCaller opens the regular file at path for reading with the rights
// of the process that made the FUSE request ctx carries: its uid, gid and
// supplementary groups. As root the open runs on an OS thread of its own
// whose file-system identity is switched to the caller's; otherwise only
// the mount owner's own requests are served.
func openAsCaller(ctx context.Context, path string) (*os.File, error) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the request names no caller", ErrCallerAccess, path)
	}
	var fd int
	var err error
	switch euid := uint32(os.Geteuid()); {
	case c.Uid == euid:
		// The mount's own user (root included) reads with its own rights.
		fd, err = openRegular(path)
	case euid == 0:
		fd, err = openAs(path, c.Uid, c.Gid, callerGroups(c.Pid))
	default:
		return nil, fmt.Errorf("%w: %s: the mount runs as uid %d and cannot take the rights of uid %d (give the rows inline)",
			ErrCallerAccess, path, euid, c.Uid)
	}
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return nil, fmt.Errorf("%w: %s: %v (uid %d)", ErrCallerAccess, path, err, c.Uid)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openRegular opens path read-only and refuses anything but a regular
// file (a FIFO or a device would never end).
func openRegular(path string) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, fmt.Errorf("%s: not a regular file", path)
	}
	return fd, nil
}
