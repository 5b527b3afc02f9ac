package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	wfs "github.com/worldfs/worldfs/fs"
)

// mountFlags are the flags of worldfs mount.
type mountFlags struct {
	url               *string
	allowOther, debug bool
	xattrs            bool
	role              string
	ctlGroup          string
	uid, gid          int
	cacheDir          string
	cacheSize         *int64
	readTimeout       time.Duration
}

func addMountFlags(fs *flag.FlagSet) *mountFlags {
	f := &mountFlags{}
	fs.BoolVar(&f.allowOther, "allow-other", false, "let other users see the mount (non-root: needs user_allow_other in /etc/fuse.conf); the kernel then enforces every file's mode, so only the owner writes ctl files")
	fs.StringVar(&f.ctlGroup, "ctl-group", "", "with --allow-other, let this group's members write ctl files too (mode 0660)")
	fs.IntVar(&f.uid, "uid", -1, "owner of every file (default: yours)")
	fs.IntVar(&f.gid, "gid", -1, "group of every file (default: yours)")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where remote fragments and materialized snapshot files are kept")
	f.cacheSize = sizeFlag(fs, "cache-size", cache.DefaultMaxBytes, "how much the cache may hold")
	fs.DurationVar(&f.readTimeout, "read-timeout", 2*time.Minute, "longest a read of the mount may wait (deriving a file, fetching a fragment, a local file that hangs) before it fails with EIO")
	fs.BoolVar(&f.debug, "debug", false, "log every FUSE request")
	fs.StringVar(&f.role, "role", envOr("WORLDFS_ROLE", "operator"), "the role ctl commands act with: viewer, operator or admin; writing facts and receipts needs operator or admin (env WORLDFS_ROLE)")
	f.url = bucketFlag(fs)
	fs.BoolVar(&f.xattrs, "xattrs", true, "serve the commit-identity extended attributes (user.worldfs.*); --xattrs=false stops every xattr request, which helps only tools that list each entry's attributes (ls -l asks none per entry either way)")
	return f
}

// openMount builds the file system of the bucket at url.
func openMount(ctx context.Context, url string, f *mountFlags) (*wfs.Mount, bucket.Bucket, error) {
	b, err := openExisting(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	c, id, err := openCache(url, f.cacheDir, *f.cacheSize)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	role, err := engine.ParseRole(f.role)
	if err != nil {
		b.Close()
		return nil, nil, usageError{msg: err.Error()}
	}
	host, _ := os.Hostname()
	m, err := wfs.New(b, wfs.Options{Cache: c, BucketID: id, Holder: fmt.Sprintf("mount@%s:%d", host, os.Getpid()), Role: role, CtlGroup: f.ctlGroup, ReadTimeout: f.readTimeout})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return m, b, nil
}

func (f *mountFlags) options() (wfs.MountOptions, error) {
	mo := wfs.MountOptions{AllowOther: f.allowOther, Debug: f.debug, NoXattrs: !f.xattrs}
	if (f.uid < 0) != (f.gid < 0) {
		return mo, usagef("give --uid and --gid together")
	}
	if f.ctlGroup != "" && !f.allowOther {
		return mo, usagef("--ctl-group lets a group write ctl files, which only --allow-other lets others reach; give both")
	}
	if f.uid >= 0 {
		mo.UID, mo.GID = uint32(f.uid), uint32(f.gid)
	}
	return mo, nil
}

// mountCmd is "worldfs mount".
func mountCmd() command {
	var mf *mountFlags
	return command{
		name:    "mount",
		summary: "mount a bucket with FUSE: worlds as read-only snapshot directories per tick and token; writes through ctl files (foreground; Ctrl-C unmounts)",
		usage:   "[--bucket URL] MOUNTPOINT   (or: BUCKET MOUNTPOINT)",
		example: "worldfs mount --bucket ./worldfs-data /mnt/worlds   # then: ls /mnt/worlds/w1/runs/main/ticks; duckdb -c \"FROM '/mnt/worlds/w1/runs/main/head/particle.parquet'\"\n" +
			"  worldfs mount --allow-other --ctl-group sim --cache-size 20GiB ./worldfs-data /mnt/worlds   # everyone reads; you and group sim write ctl",
		flags: func(fs *flag.FlagSet) { mf = addMountFlags(fs) },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			url := *mf.url
			switch {
			case len(args) == 2 && isSet(fs, "bucket"):
				return usagef("mount takes its bucket once: --bucket URL or a BUCKET argument, not both")
			case len(args) == 2:
				url, args = args[0], args[1:]
			case len(args) != 1:
				return usagef("mount takes MOUNTPOINT (and the bucket from --bucket, $WORLDFS_BUCKET, or a BUCKET argument before it)")
			}
			mo, err := mf.options()
			if err != nil {
				return err
			}
			if err := checkMountpoint(args[0]); err != nil {
				return err
			}
			args = []string{url, args[0]}
			m, b, err := openMount(ctx, args[0], mf)
			if err != nil {
				return err
			}
			defer b.Close()
			defer m.Close()
			srv, err := wfs.Serve(args[1], m, mo)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "worldfs: %s mounted at %s; Ctrl-C or 'worldfs umount %s' unmounts\n", args[0], args[1], args[1])
			done := make(chan struct{})
			go func() { srv.Wait(); close(done) }()
			select {
			case <-ctx.Done():
				if err := srv.Unmount(); err != nil {
					return fmt.Errorf("unmounting %s: %w (is a process using it? 'umount -l %s' detaches it)", args[1], err, args[1])
				}
				<-done
			case <-done: // unmounted from outside
			}
			fmt.Fprintf(out, "worldfs: %s unmounted\n", args[1])
			return nil
		},
	}
}

// umountCmd is "worldfs umount".
func umountCmd() command {
	return command{
		name:    "umount",
		summary: "unmount a worldfs mount (directly as root, through fusermount3 otherwise)",
		usage:   "MOUNTPOINT",
		example: "worldfs umount /mnt/worlds",
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 1 {
				return usagef("umount takes MOUNTPOINT")
			}
			return unmount(args[0])
		},
	}
}

// unmount detaches a FUSE mount: umount(2) as root, fusermount3 -u
// otherwise.
func unmount(dir string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(dir, 0); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("unmounting %s: busy (a process has files open there; 'umount -l %s' detaches it lazily)", dir, dir)
			}
			return fmt.Errorf("unmounting %s: %w", dir, err)
		}
		return nil
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(bin); err == nil {
			if out, err := exec.Command(p, "-u", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("%s -u %s: %v: %s", bin, dir, err, out)
			}
			return nil
		}
	}
	return fmt.Errorf("unmounting %s: not root and no fusermount3 on PATH", dir)
}
