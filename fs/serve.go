package fs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ErrNoFUSE: the kernel offers no FUSE device here.
var ErrNoFUSE = errors.New("FUSE is not available: /dev/fuse is missing (load the fuse module; in a container, run with --device /dev/fuse --cap-add SYS_ADMIN)")

// MountOptions are how Serve mounts.
type MountOptions struct {
	// AllowOther lets other users see the mount (needs user_allow_other
	// in /etc/fuse.conf when not root). The kernel then checks every
	// access against the files' owners and modes (default_permissions):
	// snapshots are readable by all, ctl files writable only by the
	// owner (and Options.CtlGroup).
	AllowOther bool
	// UID and GID own every file (default: the mounting process's).
	UID, GID uint32
	// Debug logs every FUSE request.
	Debug bool
	// NoXattrs turns extended attributes off: the kernel then stops
	// sending any xattr request (getxattr, listxattr), at the price of the
	// commit-identity attributes. ls -l costs no xattr request per entry
	// either way (see userXattrs); a tool that lists every entry's
	// attributes does, one round trip each.
	NoXattrs bool
}

// Serve mounts m at dir and serves it until the returned server is
// unmounted. As root it mounts directly; otherwise through fusermount3.
func Serve(dir string, m *Mount, mo MountOptions) (*fuse.Server, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, ErrNoFUSE
	}
	uid, gid := mo.UID, mo.GID
	if uid == 0 && gid == 0 {
		uid, gid = uint32(os.Getuid()), uint32(os.Getgid())
	}
	var kernel []string
	if mo.AllowOther {
		// Without it the kernel lets anyone who can enter the mount do
		// anything the file system does not refuse itself: the modes
		// would be decoration.
		kernel = append(kernel, "default_permissions")
	}
	opts := &gofs.Options{
		MountOptions: fuse.MountOptions{
			Options:      kernel,
			AllowOther:   mo.AllowOther,
			FsName:       "worldfs",
			Name:         "worldfs",
			DirectMount:  os.Geteuid() == 0,
			Debug:        mo.Debug,
			MaxReadAhead: 1 << 20,
			MaxWrite:     1 << 20, // a command up to 1 MiB arrives in one write
			// ENOSYS for xattrs, which the kernel remembers for the mount.
			DisableXAttrs: mo.NoXattrs,
			// The kernel asks for entries with their attributes
			// (READDIRPLUS, a lookup per entry) only for a listing's
			// first reply and while the lister stats what it reads (ls
			// -l): a plain ls of 100,000 ticks costs no lookup of each.
			ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
		},
		UID: uid,
		GID: gid,
		// Timeouts are set per entry (see timeouts in nodes.go); failed
		// lookups are not cached, so a tick appears as soon as it is
		// published.
	}
	srv, err := fuse.NewServer(userXattrs{gofs.NewNodeFS(m.Root(), opts), m.stats}, dir, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return nil, fmt.Errorf("mounting %s: %w", dir, err)
	}
	return srv, nil
}

// userXattrs serves extended attributes of the user namespace only (the
// commit identity, user.worldfs.*): a name in any other (security.selinux,
// system.posix_acl_access, system.posix_acl_default, trusted.*) is
// EOPNOTSUPP at once, without a node. ls -l asks for those three for
// every entry; an answer of "none here" (ENODATA) has it ask again for the
// next, a round trip to this process each (15-30 s for 100,000 ticks),
// while "not supported" it remembers for the whole file system and stops
// asking. The stats count every getxattr request the mount receives.
type userXattrs struct {
	fuse.RawFileSystem
	stats *Stats
}

func (x userXattrs) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	defer x.stats.op("getxattr", time.Now())
	if !strings.HasPrefix(attr, "user.") {
		return 0, fuse.ENOTSUP
	}
	return x.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}
