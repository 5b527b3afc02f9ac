package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// Options configure a mount. The zero value is usable except for Cache,
// which Validate requires.
type Options struct {
	// Cache holds copies of a remote bucket's fragments and the snapshot
	// files the mount materializes (required).
	Cache *cache.Disk
	// BucketID names the bucket in the cache (required for remote
	// buckets; local buckets are read in place).
	BucketID string
	// Freshness bounds how stale a listing or head may be (500 ms, so
	// that ticks/ and head move within a second of a publish).
	Freshness time.Duration
	// Immutable is the kernel entry and attribute timeout of snapshot
	// entries, which never change (1 h).
	Immutable time.Duration
	// Holder names this mount's writers in fence entries ("mount").
	Holder string
	// Writer options for the worlds the ctl file creates, forks and
	// resumes (their Holder is set from Holder).
	Writer engine.Options
	// Role is what ctl commands may do through the fact gate: writing
	// facts and receipts needs engine.RoleOperator (the default) or
	// higher. Who may write a ctl file at all is the file's permissions.
	Role engine.Role
	// Ingest configures fact ingestion (its MaxWait defaults to 2 s: a
	// ctl write that finds another holder's live claim answers EAGAIN
	// rather than block for a lease).
	Ingest engine.IngestOptions
	// ReadTimeout bounds each read the mount serves from its own paths
	// (deriving a file, fetching a fragment into the cache, opening or
	// reading a local file): past it the read fails with EIO instead of
	// waiting on a stalled bucket or file system (2 min; bucket calls
	// have their own, shorter deadlines).
	ReadTimeout time.Duration
	// CtlGroup names a group (by name or number) whose members may write
	// the ctl files too (mode 0660, that group). Empty: only the mount's
	// owner may (mode 0600).
	CtlGroup string

	ctlGID int64 // CtlGroup resolved; -1: none
}

// Validate fills in defaults and checks the options.
func (o *Options) Validate(b bucket.Bucket) error {
	if o.Cache == nil {
		return errors.New("mount options: a cache is required (materialized snapshots live there)")
	}
	if _, isLocal := b.(*local.Bucket); !isLocal && o.BucketID == "" {
		return fmt.Errorf("mount options: %v is remote; its fragments are read through the cache, which needs a BucketID", b)
	}
	if o.Freshness <= 0 {
		o.Freshness = 500 * time.Millisecond
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 2 * time.Minute
	}
	if o.Immutable <= 0 {
		o.Immutable = time.Hour
	}
	if o.Holder == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Holder = "mount-" + hex.EncodeToString(b[:]) // holders must differ between mounts
	}
	o.Writer.Holder = o.Holder
	if o.Role == 0 {
		o.Role = engine.RoleOperator
	}
	if o.Ingest.MaxWait == 0 {
		o.Ingest.MaxWait = 2 * time.Second
	}
	if o.Ingest.Holder == "" {
		o.Ingest.Holder = o.Holder + "-ingest"
	}
	o.ctlGID = -1
	if o.CtlGroup != "" {
		g, err := user.LookupGroup(o.CtlGroup)
		if err != nil {
			g, err = user.LookupGroupId(o.CtlGroup)
		}
		if err != nil {
			return fmt.Errorf("mount options: ctl group %q: no such group", o.CtlGroup)
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		if err != nil || gid == 0 {
			return fmt.Errorf("mount options: ctl group %q (gid %s): name a group other than root's", o.CtlGroup, g.Gid)
		}
		o.ctlGID = int64(gid)
	}
	return nil
}

// Mount is the file system of one bucket: its root node, the catalogs it
// reads, and the writers its ctl files hold.
type Mount struct {
	// Immutable.
	b     bucket.Bucket
	local *local.Bucket // nil: a remote bucket, read through the cache
	opts  Options
	stats *Stats
	// startedMs is when the mount began (Unix ms): the modification time
	// of what has no commit time of its own (the root, ctl files, stats).
	startedMs int64
	// verified remembers the bucket files found to match their catalog
	// records (kept in the cache directory).
	verified *cache.Verified

	mu struct {
		sync.Mutex
		cats     map[string]*index.Catalog           // read-only catalogs, by world
		infos    map[string]engine.TableInfo         // by world/table id; immutable objects
		worlds   []string                            // the world directory, sorted
		worldsAt time.Time                           // when worlds was read
		writers  map[string]*writer                  // by world
		ingest   map[string]*engine.IngestionService // by world
		closed   bool
	}
}

// New returns the file system of b.
func New(b bucket.Bucket, opts Options) (*Mount, error) {
	if err := opts.Validate(b); err != nil {
		return nil, err
	}
	m := &Mount{b: b, opts: opts, stats: newStats(), startedMs: time.Now().UnixMilli()}
	m.local, _ = b.(*local.Bucket)
	m.verified = cache.OpenVerified(filepath.Join(opts.Cache.Dir(), "verified"))
	m.mu.cats = map[string]*index.Catalog{}
	m.mu.infos = map[string]engine.TableInfo{}
	m.mu.writers = map[string]*writer{}
	m.mu.ingest = map[string]*engine.IngestionService{}
	return m, nil
}

// Root returns the root directory node.
func (m *Mount) Root() gofs.InodeEmbedder { return &rootDir{dirBase: dirBase{m: m}} }

// Close releases the writers and catalogs. A tick being committed is
// decided first (Close waits for the writer).
func (m *Mount) Close() error {
	m.mu.Lock()
	m.mu.closed = true
	cats, writers := m.mu.cats, m.mu.writers
	m.mu.cats, m.mu.writers = map[string]*index.Catalog{}, map[string]*writer{}
	m.mu.Unlock()
	var errs []error
	for _, w := range writers {
		w.mu.Lock()
		errs = append(errs, w.w.Close())
		w.mu.Unlock()
	}
	for _, c := range cats {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

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
	// NoXattrs turns extended attributes off: the kernel then stops asking
	// (ls -l asks for three per entry: an SELinux label and two ACLs, each
	// a round trip to this process), at the price of the commit-identity
	// attributes. A listing of 100,000 ticks goes from tens of seconds to
	// about one.
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
		},
		UID: uid,
		GID: gid,
		// Timeouts are set per entry (see timeouts in nodes.go); failed
		// lookups are not cached, so a tick appears as soon as it is
		// published.
	}
	srv, err := gofs.Mount(dir, m.Root(), opts)
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", dir, err)
	}
	return srv, nil
}

// ino is the stable inode number of a path in the tree.
func ino(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()&(1<<62-1) | 1<<61 // below go-fuse's automatic numbers, never 0 or 1
}

// catalog returns the read-only catalog of world, opening it on first use.
func (m *Mount) catalog(ctx context.Context, world string) (*index.Catalog, error) {
	ctx = finish(ctx)
	m.mu.Lock()
	c, ok := m.mu.cats[world]
	m.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := index.Open(ctx, m.b, world, index.Options{Freshness: m.opts.Freshness, NoCompactor: true})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		c.Close()
		return nil, index.ErrClosed
	}
	if old, ok := m.mu.cats[world]; ok {
		c.Close()
		return old, nil
	}
	m.mu.cats[world] = c
	return c, nil
}

// state returns world's catalog state: exact includes every slot created
// before the call (path lookups of something not yet seen); otherwise it is
// at most Freshness old (listings).
func (m *Mount) state(ctx context.Context, world string, exact bool) (*index.State, error) {
	ctx = finish(ctx)
	c, err := m.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	if exact {
		return c.Exact(ctx)
	}
	return c.Fresh(ctx)
}

// worlds returns the world directory, at most Freshness old.
func (m *Mount) worlds(ctx context.Context) ([]string, error) {
	ctx = finish(ctx)
	m.mu.Lock()
	ws, at := m.mu.worlds, m.mu.worldsAt
	m.mu.Unlock()
	if time.Since(at) < m.opts.Freshness {
		return ws, nil
	}
	ms, err := index.ListWorlds(ctx, m.b)
	if err != nil {
		return nil, err
	}
	ws = make([]string, 0, len(ms))
	for _, mk := range ms {
		ws = append(ws, mk.ID)
	}
	slices.Sort(ws)
	m.mu.Lock()
	m.mu.worlds, m.mu.worldsAt = ws, time.Now()
	m.mu.Unlock()
	return ws, nil
}

// worldExists reports whether world was created: from the directory, or,
// for a world newer than it, from the world's marker and catalog.
func (m *Mount) worldExists(ctx context.Context, world string) (bool, error) {
	if index.ValidateWorldID(world) != nil {
		return false, nil
	}
	ws, err := m.worlds(ctx)
	if err != nil {
		return false, err
	}
	if _, found := slices.BinarySearch(ws, world); !found {
		if _, err := index.ReadMarker(ctx, m.b, world); errors.Is(err, bucket.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	s, err := m.state(ctx, world, false)
	if err == nil && !s.World.Created {
		s, err = m.state(ctx, world, true)
	}
	if err != nil {
		return false, err
	}
	return s.World.Created, nil
}

// view returns the visibility plan of (world, run): its lineage, each
// segment resolved against its world's catalog snapshot (exact: confirmed
// at the tip now; otherwise within the freshness bound).
func (m *Mount) view(ctx context.Context, world, run string, exact bool) (*index.View, error) {
	return index.OpenView(ctx, func(ctx context.Context, w string) (*index.State, error) {
		return m.state(ctx, w, exact)
	}, world, run)
}

// runs returns the runs of world that have visible ticks of their own or,
// for a fork, inherited ones (its "main" run).
func (m *Mount) runs(ctx context.Context, world string) ([]string, error) {
	s, err := m.state(ctx, world, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range s.Runs() {
		out = append(out, r.Name)
	}
	if s.World.Parent != "" && !slices.Contains(out, "main") {
		out = append(out, "main")
		slices.Sort(out)
	}
	return out, nil
}

// tickRef is one visible tick as the mount serves it: the manifest and the
// segment (world, run) whose catalog published it.
type tickRef = index.TickRef

// resolve finds what find looks for in (world, run)'s view: in a fresh
// snapshot, then, if it is not there, in an exact one (a tick published a
// moment ago exists).
func (m *Mount) resolve(ctx context.Context, world, run string, find func(*index.View) (tickRef, bool)) (tickRef, bool, error) {
	for _, exact := range []bool{false, true} {
		v, err := m.view(ctx, world, run, exact)
		if err != nil {
			return tickRef{}, false, err
		}
		if t, ok := find(v); ok {
			return t, true, nil
		}
	}
	return tickRef{}, false, nil
}

// tick resolves visible tick n of (world, run).
func (m *Mount) tick(ctx context.Context, world, run string, n int64) (tickRef, bool, error) {
	return m.resolve(ctx, world, run, func(v *index.View) (tickRef, bool) { return v.Tick(n) })
}

// token resolves a commit token of (world, run) to its visible tick.
func (m *Mount) token(ctx context.Context, world, run, token string) (tickRef, bool, error) {
	return m.resolve(ctx, world, run, func(v *index.View) (tickRef, bool) { return v.Token(token) })
}

// head returns the newest visible tick of (world, run).
func (m *Mount) head(ctx context.Context, world, run string) (tickRef, bool, error) {
	v, err := m.view(ctx, world, run, false)
	if err != nil {
		return tickRef{}, false, err
	}
	t, ok := v.Head()
	return t, ok, nil
}

// tableInfo returns world's description of table id (immutable, kept).
func (m *Mount) tableInfo(ctx context.Context, world, id string) (engine.TableInfo, error) {
	ctx = finish(ctx)
	key := world + "/" + id
	m.mu.Lock()
	ti, ok := m.mu.infos[key]
	m.mu.Unlock()
	if ok {
		return ti, nil
	}
	ti, err := engine.ReadTableInfo(ctx, m.b, world, id)
	if err != nil {
		return ti, fmt.Errorf("world %s: table %s has no description: %w", world, id, err)
	}
	m.mu.Lock()
	m.mu.infos[key] = ti
	m.mu.Unlock()
	return ti, nil
}

// tickTables returns the tables a tick published, by readable name.
func (m *Mount) tickTables(ctx context.Context, t tickRef) (map[string]index.TableFragments, error) {
	out := make(map[string]index.TableFragments, len(t.Tables))
	for _, tf := range t.Tables {
		info, err := m.tableInfo(ctx, t.World, tf.Table)
		if err != nil {
			return nil, err
		}
		out[info.Name] = tf
	}
	return out, nil
}

// isExact reports whether tf's fragment is exactly the tick's visible rows
// of the table: one fragment, which the catalog proves holds only rows
// stamped with the tick's token.
func isExact(t tickRef, tf index.TableFragments) bool {
	return len(tf.Fragments) == 1 && index.Proven(t.World, t.Run, tf.Table, t.CommitToken, tf.Fragments[0])
}

// ingestion returns the world's fact ingestion service, which commits
// through the mount's catalog of the world.
func (m *Mount) ingestion(ctx context.Context, world string) (*engine.IngestionService, error) {
	m.mu.Lock()
	svc, ok := m.mu.ingest[world]
	m.mu.Unlock()
	if ok {
		return svc, nil
	}
	if _, err := m.state(ctx, world, true); err != nil {
		return nil, err
	}
	c, err := m.catalog(ctx, world)
	if err != nil {
		return nil, err
	}
	if !c.Tip().World.Created {
		return nil, fmt.Errorf("world %s: %w", world, index.ErrNoWorld)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if svc, ok := m.mu.ingest[world]; ok {
		return svc, nil
	}
	svc = engine.NewIngestionService(m.b, c, m.opts.Ingest)
	m.mu.ingest[world] = svc
	return svc, nil
}

func (m *Mount) gate(svc *engine.IngestionService) *engine.Gate { return engine.NewGate(svc) }

func (m *Mount) principal() engine.Principal {
	return engine.Principal{Name: m.opts.Holder, Role: m.opts.Role}
}

// finish returns ctx without its cancellation, for the mount's reads: the
// kernel interrupts a request whenever the caller's thread takes a signal
// (Go's runtime preempts goroutines with one), and answering those with
// EINTR fails callers that do not retry. Reads are short and bounded by
// their own timeouts, so they run to their end.
func finish(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
