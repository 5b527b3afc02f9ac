// Package local is the default bucket: a directory on a local file system,
// one file per object at the object's name, so a bucket can be browsed and
// its Parquet fragments read in place.
//
// Create writes a temporary file under <root>/.worldfs/tmp, fsyncs it,
// link(2)s it to the final name (EEXIST means the name is taken, since link
// never replaces) and fsyncs the directory, so a crash at any moment leaves
// either the whole object or nothing under its name. A directory it makes
// on the way has its entry fsynced into its parent while the temporary
// file is written and fsynced, so a create into a new directory waits for
// two rounds of fsync, not three. Creates and deletes in one directory at
// the same time share its fsyncs: each returns after one that began after
// its own link or unlink (see dirSyncs). Deletes are serialized
// across processes by a lock file, which makes "check the generation, then
// unlink" atomic with respect to other deletes; a create cannot interleave
// since it needs the name absent.
//
// One limit of a file system shows through: a name cannot be both an object
// and the directory of other objects ("a" and "a/b"). Such a Create fails
// with an error saying so.
//
// A file system can hang (a dead NFS server, a failing disk), and a system
// call cannot be cancelled. So every call runs on a goroutine of its own and
// the caller waits at most Options.Timeout without progress for it; then
// the call fails with *bucket.NotAnsweringError and is abandoned. An
// abandoned call keeps its goroutine, and any file it holds open, until the
// file system answers; then it finishes on its own and its result is
// dropped. It never passes its commit point after being abandoned: a create
// or delete checks, just before link(2) or unlink(2), whether its caller is
// still waiting, and stops if not (a create then removes its temporary
// file). So an abandoned create or delete that had not reached that point is
// known to have changed nothing (NotAnsweringError.Unapplied); one already
// in link(2) or unlink(2), or in the fsync after it, may still land, and is
// reported as bucket.ErrAmbiguous.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/internal/failpoint"
)

// Failpoints in Create, in the order they are passed.
const (
	FailpointWritten = "local.create.written" // temp file written, not yet synced
	FailpointSynced  = "local.create.synced"  // temp file synced, not yet linked
	FailpointLinked  = "local.create.linked"  // linked under its name, directory not yet synced
	FailpointDone    = "local.create.done"    // durable, temp name not yet removed
)

// staleTempAge is the age past which a temporary file is removed at Open
// even if the process that wrote it looks alive (its pid may be reused).
const staleTempAge = 24 * time.Hour

// Options tune a local bucket.
type Options struct {
	// Timeout is how long a call waits on a file system that makes no
	// progress before giving the call up (default bucket.DefaultTimeout).
	Timeout time.Duration
}

// EnsureDefaults fills in what is unset (zero) with its default and
// returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Timeout == 0 {
		o.Timeout = bucket.DefaultTimeout
	}
	return o
}

// Validate checks the options once their defaults are in (OpenWith calls
// EnsureDefaults, then Validate); the error names the field and its value.
func (o *Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("local bucket options: Timeout %v is negative (0: the default, %v)", o.Timeout, bucket.DefaultTimeout)
	}
	return nil
}

// Bucket is a local directory bucket.
type Bucket struct {
	timeout time.Duration
	root    string // absolute, clean
	tmp     string // root/.worldfs/tmp
	lock    string // root/.worldfs/delete.lock
	// synced holds directories whose own entry this process has fsynced
	// into their parent; a directory made by another process (perhaps one
	// that crashed before syncing) is synced again before it is trusted.
	synced dirSet
	// syncs shares the fsyncs of a directory between concurrent creates
	// and deletes in it.
	syncs dirSyncs
	// made is set once the first write has made the bucket's directories
	// (reading never makes them: see OpenWith).
	madeMu sync.Mutex
	made   bool
}

var (
	_ bucket.Bucket      = (*Bucket)(nil)
	_ bucket.Local       = (*Bucket)(nil)
	_ bucket.Addressable = (*Bucket)(nil)
	_ bucket.Made        = (*Bucket)(nil)
)

// Open opens the bucket rooted at dir with default options and removes
// temporary files left by crashed writers. Opening and reading change
// nothing else: a missing directory reads as an empty bucket, and the first
// Create or Delete makes it (Exists tells the two apart).
func Open(dir string) (*Bucket, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options. Opening is bounded by the timeout too.
func OpenWith(dir string, opts Options) (*Bucket, error) {
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local bucket %s: %w", dir, err)
	}
	b := &Bucket{
		timeout: opts.Timeout,
		root:    root,
		tmp:     filepath.Join(root, bucket.ReservedPrefix, "tmp"),
		lock:    filepath.Join(root, bucket.ReservedPrefix, "delete.lock"),
	}
	_, err = bounded(context.Background(), b, "open", "", func(context.Context, *call) (struct{}, error) {
		return struct{}{}, b.prepare(dir)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// prepare checks an existing bucket's root and removes crashed writers'
// temporary files; it makes nothing.
func (b *Bucket) prepare(dir string) error {
	info, err := os.Stat(b.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local bucket %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("local bucket %s: not a directory", dir)
	}
	if err := b.cleanTemp(); err != nil {
		return fmt.Errorf("local bucket %s: cleaning temporary files: %w", dir, err)
	}
	return nil
}

// Exists reports whether the bucket's directory exists.
func (b *Bucket) Exists() (bool, error) {
	_, err := os.Stat(b.root)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Make makes the bucket's directories, if this process has not yet, and
// checks the file system: the first write calls it.
func (b *Bucket) Make() error {
	b.madeMu.Lock()
	defer b.madeMu.Unlock()
	if b.made {
		return nil
	}
	if err := os.MkdirAll(b.tmp, 0o755); err != nil {
		return fmt.Errorf("local bucket %s: %w", b.root, err)
	}
	if err := b.checkTimestamps(); err != nil {
		return fmt.Errorf("local bucket %s: %w", b.root, err)
	}
	b.made = true
	return nil
}

// checkTimestamps refuses file systems that do not keep modification times
// to the nanosecond: generations are those times, and must never repeat for
// one name.
func (b *Bucket) checkTimestamps() error {
	probe := filepath.Join(b.tmp, strconv.Itoa(os.Getpid())+"-timestamp-probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		return err
	}
	defer os.Remove(probe)
	want := time.Unix(1, 123456789)
	if err := os.Chtimes(probe, want, want); err != nil {
		return err
	}
	info, err := os.Stat(probe)
	if err != nil {
		return err
	}
	if !info.ModTime().Equal(want) {
		return fmt.Errorf("the file system keeps modification times only to %v; worldfs needs nanoseconds for object generations",
			want.Sub(info.ModTime()))
	}
	return nil
}

// Root returns the bucket's directory.
func (b *Bucket) Root() string { return b.root }

// Path returns the file that holds name. Readers may open it in place.
func (b *Bucket) Path(name string) (string, error) {
	if err := bucket.ValidateName(name); err != nil {
		return "", err
	}
	return filepath.Join(b.root, filepath.FromSlash(name)), nil
}

func (b *Bucket) String() string { return b.root }

// URI is the bucket's root as other programs address it: file://<root>/
// (bucket.Addressable).
func (b *Bucket) URI() string { return "file://" + strings.TrimSuffix(b.root, "/") + "/" }

// cleanTemp removes temporary files whose writer is gone: its pid is not
// running, or the file is older than staleTempAge.
func (b *Bucket) cleanTemp() error {
	entries, err := os.ReadDir(b.tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, _, _ := strings.Cut(e.Name(), "-")
		if n, err := strconv.Atoi(pid); err == nil && alive(n) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < staleTempAge {
				continue
			}
		}
		if err := os.Remove(filepath.Join(b.tmp, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (b *Bucket) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	path, err := b.Path(name)
	if err != nil {
		return bucket.Attrs{}, err
	}
	return bounded(ctx, b, "create", name, func(_ context.Context, c *call) (bucket.Attrs, error) {
		return b.create(c, name, path, data)
	})
}

func (b *Bucket) create(c *call, name, path string, data []byte) (bucket.Attrs, error) {
	if err := b.Make(); err != nil {
		return bucket.Attrs{}, err
	}
	// The directories' entries are synced while the data is written and
	// synced: both must be durable before the link is, not one before the
	// other, so a create into a new directory waits for two rounds of
	// fsync (these, then the directory after the link) rather than three.
	made, err := b.mkdirs(filepath.Dir(path))
	if err != nil {
		return bucket.Attrs{}, fmt.Errorf("local: create %s: %w", name, err)
	}
	dirsDone := make(chan error, 1)
	go func() { dirsDone <- b.syncMade(made) }()
	tmp, attrs, err := b.writeTemp(data)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if derr := <-dirsDone; err == nil {
		err = derr
	}
	if err != nil {
		return bucket.Attrs{}, fmt.Errorf("local: create %s: %w", name, err)
	}
	failpoint.Hit(FailpointSynced)
	if !c.commit() {
		return bucket.Attrs{}, errAbandoned
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if info, serr := os.Lstat(path); serr == nil && info.IsDir() {
				return bucket.Attrs{}, fmt.Errorf("local: create %s: the name is a directory of other objects", name)
			}
			// The winner may not have synced its entry yet (or crashed
			// before it did): make it durable before calling it taken.
			if err := b.syncs.sync(filepath.Dir(path)); err != nil {
				return bucket.Attrs{}, fmt.Errorf("local: create %s: %w: %w", name, bucket.ErrAmbiguous, err)
			}
			return bucket.Attrs{}, fmt.Errorf("local: create %s: %w", name, bucket.ErrExist)
		}
		return bucket.Attrs{}, fmt.Errorf("local: create %s: %w", name, err)
	}
	failpoint.Hit(FailpointLinked)
	if err := b.syncs.sync(filepath.Dir(path)); err != nil {
		// The object is linked, but its durability is unknown.
		return bucket.Attrs{}, fmt.Errorf("local: create %s: %w: %w", name, bucket.ErrAmbiguous, err)
	}
	failpoint.Hit(FailpointDone)
	attrs.Name = name
	return attrs, nil
}

// writeTemp writes data to a new temporary file and syncs it. The file's
// modification time is set to the creation instant in nanoseconds and is the
// object's generation.
func (b *Bucket) writeTemp(data []byte) (string, bucket.Attrs, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(b.tmp, strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", bucket.Attrs{}, err
	}
	created := time.Now()
	_, err = f.Write(data)
	failpoint.Hit(FailpointWritten)
	if err == nil {
		err = os.Chtimes(tmp, created, created)
	}
	if err == nil {
		err = b.syncs.fsyncFile(f)
	}
	var info fs.FileInfo
	if err == nil {
		info, err = f.Stat() // the generation as every later Stat reads it
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return tmp, bucket.Attrs{}, err
	}
	return tmp, attrsOf("", info), nil
}

// mkdirs makes sure dir and its parents exist, and returns the
// directories on the way from the root whose entries must still be synced
// into their parents: those it made, and existing ones this process has not
// synced yet (another process may have made them and crashed before
// syncing). syncMade syncs them, so that a durable object is never left
// behind an entry a crash can lose.
func (b *Bucket) mkdirs(dir string) ([]string, error) {
	if dir == b.root || b.synced.has(dir) {
		return nil, nil
	}
	made, err := b.mkdirs(filepath.Dir(dir))
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("%s is an object, so it cannot hold other objects", b.rel(filepath.Dir(dir)))
		}
		return nil, err
	}
	if info, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !info.IsDir() {
		return nil, fmt.Errorf("%s is an object, so it cannot hold other objects", b.rel(dir))
	}
	return append(made, dir), nil
}

// syncMade syncs the parent of each directory mkdirs returned (a chain,
// so each parent once), then remembers the directories as synced.
func (b *Bucket) syncMade(made []string) error {
	for _, dir := range made {
		if err := b.syncs.sync(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	for _, dir := range made {
		b.synced.add(dir)
	}
	return nil
}

func (b *Bucket) rel(path string) string {
	r, err := filepath.Rel(b.root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

func attrsOf(name string, info fs.FileInfo) bucket.Attrs {
	return bucket.Attrs{Name: name, Size: info.Size(), Generation: Generation(info), Created: info.ModTime()}
}

// open opens name's file for reading and stats it through the same handle.
func (b *Bucket) open(ctx context.Context, op, name string) (*os.File, bucket.Attrs, error) {
	path, err := b.Path(name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, bucket.Attrs{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, bucket.Attrs{}, b.readErr(op, name, err)
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		f.Close()
		return nil, bucket.Attrs{}, b.readErr(op, name, err)
	}
	return f, attrsOf(name, info), nil
}

func (b *Bucket) readErr(op, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("local: %s %s: %w", op, name, bucket.ErrNotExist)
	}
	return fmt.Errorf("local: %s %s: %w", op, name, err)
}

// readPiece is how much one read(2) of an object asks for; each piece is
// progress for the call's deadline.
const readPiece = 1 << 20

// readAt fills data from f at off, piece by piece.
func readAt(c *call, f *os.File, data []byte, off int64) error {
	for len(data) > 0 {
		n, err := f.ReadAt(data[:min(len(data), readPiece)], off)
		data, off = data[n:], off+int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) && len(data) > 0 {
				err = io.ErrUnexpectedEOF
			}
			if len(data) > 0 {
				return err
			}
		}
		c.progress()
	}
	return nil
}

type getResult struct {
	data  []byte
	attrs bucket.Attrs
}

func (b *Bucket) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if _, err := b.Path(name); err != nil {
		return nil, bucket.Attrs{}, err
	}
	r, err := bounded(ctx, b, "get", name, func(ctx context.Context, c *call) (getResult, error) {
		f, attrs, err := b.open(ctx, "get", name)
		if err != nil {
			return getResult{}, err
		}
		defer f.Close()
		data := make([]byte, attrs.Size)
		if err := readAt(c, f, data, 0); err != nil {
			return getResult{}, fmt.Errorf("local: get %s: %w", name, err)
		}
		return getResult{data, attrs}, nil
	})
	return r.data, r.attrs, err
}

func (b *Bucket) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	if _, err := b.Path(name); err != nil {
		return nil, err
	}
	return bounded(ctx, b, "get", name, func(ctx context.Context, c *call) ([]byte, error) {
		f, attrs, err := b.open(ctx, "get", name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		lo, hi, err := bucket.ClampRange(name, attrs.Size, offset, length)
		if err != nil {
			return nil, err
		}
		data := make([]byte, hi-lo)
		if err := readAt(c, f, data, lo); err != nil {
			return nil, fmt.Errorf("local: get %s: %w", name, err)
		}
		return data, nil
	})
}

func (b *Bucket) Stat(ctx context.Context, name string) (bucket.Attrs, error) {
	path, err := b.Path(name)
	if err != nil {
		return bucket.Attrs{}, err
	}
	return bounded(ctx, b, "stat", name, func(context.Context, *call) (bucket.Attrs, error) {
		return b.stat(name, path)
	})
}

func (b *Bucket) stat(name, path string) (bucket.Attrs, error) {
	info, err := os.Stat(path)
	if err == nil && !info.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return bucket.Attrs{}, b.readErr("stat", name, err)
	}
	return attrsOf(name, info), nil
}

// List walks the directory tree in name order. Each directory is read once
// per listing; entries sort as their names would, a directory "d" as "d/".
func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	if err := bucket.ValidatePrefix(prefix); err != nil {
		return func(yield func(bucket.Attrs, error) bool) { yield(bucket.Attrs{}, err) }
	}
	return boundedList(ctx, b, prefix, func(ctx context.Context) iter.Seq2[bucket.Attrs, error] {
		return func(yield func(bucket.Attrs, error) bool) {
			dir := prefix[:strings.LastIndexByte(prefix, '/')+1]
			if err := b.walk(ctx, dir, prefix, startAfter, yield); err != nil && err != errStop {
				yield(bucket.Attrs{}, err)
			}
		}
	})
}

type entry struct {
	key string // the name, with "/" appended for a directory
	dir bool
}

var errStop = errors.New("stop")

// walk yields the objects under dir ("" or ending in "/") that match prefix
// and sort after startAfter. It returns errStop when the caller stopped.
func (b *Bucket) walk(ctx context.Context, dir, prefix, startAfter string, yield func(bucket.Attrs, error) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	des, err := os.ReadDir(filepath.Join(b.root, filepath.FromSlash(dir)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("local: list %s: %w", dir, err)
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		if dir == "" && de.Name() == bucket.ReservedPrefix {
			continue
		}
		if de.IsDir() {
			entries = append(entries, entry{dir + de.Name() + "/", true})
		} else if de.Type().IsRegular() {
			entries = append(entries, entry{dir + de.Name(), false})
		}
	}
	slices.SortFunc(entries, func(x, y entry) int { return strings.Compare(x.key, y.key) })
	// Skip every entry that sorts wholly at or before startAfter.
	i, _ := slices.BinarySearchFunc(entries, startAfter, func(e entry, t string) int {
		if e.dir && strings.HasPrefix(t, e.key) {
			return 0 // startAfter lies inside this directory
		}
		return strings.Compare(e.key, t)
	})
	for _, e := range entries[i:] {
		switch {
		case strings.HasPrefix(e.key, prefix):
		case e.dir && strings.HasPrefix(prefix, e.key):
		case e.key > prefix:
			return nil // sorted: nothing later can match
		default:
			continue
		}
		if e.dir {
			if err := b.walk(ctx, e.key, prefix, startAfter, yield); err != nil {
				return err
			}
			continue
		}
		if e.key <= startAfter {
			continue
		}
		info, err := os.Stat(filepath.Join(b.root, filepath.FromSlash(e.key)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted while listing
		}
		if err != nil {
			return fmt.Errorf("local: list %s: %w", e.key, err)
		}
		if !yield(attrsOf(e.key, info), nil) {
			return errStop
		}
	}
	return nil
}

func (b *Bucket) Delete(ctx context.Context, name string, generation int64) error {
	path, err := b.Path(name)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, b, "delete", name, func(_ context.Context, c *call) (struct{}, error) {
		return struct{}{}, b.delete(c, name, path, generation)
	})
	return err
}

func (b *Bucket) delete(c *call, name, path string, generation int64) error {
	if err := b.Make(); err != nil {
		return err
	}
	unlock, err := b.lockDeletes()
	if err != nil {
		return fmt.Errorf("local: delete %s: %w", name, err)
	}
	defer unlock()
	info, err := os.Stat(path)
	if err == nil && !info.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return b.readErr("delete", name, err)
	}
	if gen := info.ModTime().UnixNano(); gen != generation {
		return fmt.Errorf("local: delete %s at generation %d (now %d): %w", name, generation, gen, bucket.ErrGenerationMismatch)
	}
	if !c.commit() {
		return errAbandoned
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("local: delete %s: %w", name, err)
	}
	if err := b.syncs.sync(filepath.Dir(path)); err != nil {
		return fmt.Errorf("local: delete %s: %w: %w", name, bucket.ErrAmbiguous, err)
	}
	return nil
}

// lockDeletes takes the bucket-wide delete lock, shared by every process.
func (b *Bucket) lockDeletes() (func(), error) {
	f, err := os.OpenFile(b.lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (b *Bucket) Close() error { return nil }

// dirSet remembers synced directories, bounded: every fragment has a
// directory of its own (its commit token), so a long-running writer would
// otherwise remember one per commit. Forgetting only costs a redundant
// fsync.
type dirSet struct {
	mu   sync.Mutex
	dirs map[string]struct{}
}

const maxSyncedDirs = 1 << 16

func (s *dirSet) has(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.dirs[dir]
	return ok
}

func (s *dirSet) add(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirs == nil || len(s.dirs) >= maxSyncedDirs {
		s.dirs = make(map[string]struct{})
	}
	s.dirs[dir] = struct{}{}
}
