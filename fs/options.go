package fs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
)

// Options configure a mount. The zero value is usable except for Cache,
// which Validate requires (and BucketID, for a remote bucket).
type Options struct {
	// Cache holds copies of a remote bucket's fragments and the snapshot
	// files the mount materializes (required).
	Cache *cache.Disk
	// BucketID names the bucket in the cache (required for remote
	// buckets; local buckets are read in place).
	BucketID string
	// Freshness bounds how stale a listing or head may be
	// (DefaultFreshness).
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
	// MaxCatalogs bounds the worlds whose catalogs the mount keeps open
	// for reading (DefaultMaxCatalogs): past it the least recently used
	// is closed and its memory given back, so that a mount of many worlds
	// holds what its readers use, not every world they ever touched.
	MaxCatalogs int

	ctlGID int64 // CtlGroup resolved; -1: none
}

// Defaults of the mount's options.
const (
	// DefaultFreshness is half the catalog's own (index.DefaultFreshness),
	// so that ticks/ and head move within a second of a publish.
	DefaultFreshness   = 500 * time.Millisecond
	DefaultReadTimeout = 2 * time.Minute
	DefaultImmutable   = time.Hour
	// DefaultIngestWait is the ingestion's MaxWait: a ctl write that finds
	// another holder's live claim answers EAGAIN rather than block for a
	// lease.
	DefaultIngestWait = 2 * time.Second
	// DefaultMaxCatalogs: a few MiB of catalog state at most for worlds
	// of a few ticks each; long worlds hold more each.
	DefaultMaxCatalogs = 1024
)

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Freshness <= 0 {
		o.Freshness = DefaultFreshness
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Immutable <= 0 {
		o.Immutable = DefaultImmutable
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
		o.Ingest.MaxWait = DefaultIngestWait
	}
	if o.Ingest.Holder == "" {
		o.Ingest.Holder = o.Holder + "-ingest"
	}
	if o.MaxCatalogs <= 0 {
		o.MaxCatalogs = DefaultMaxCatalogs
	}
	return o
}

// Validate checks the options once their defaults are in, for a mount of
// b (New calls EnsureDefaults, then Validate). It resolves CtlGroup.
func (o *Options) Validate(b bucket.Bucket) error {
	if o.Cache == nil {
		return errors.New("mount options: a cache is required (materialized snapshots live there)")
	}
	if _, isLocal := bucket.As[bucket.Local](b); !isLocal && o.BucketID == "" {
		return fmt.Errorf("mount options: %v is remote; its fragments are read through the cache, which needs a BucketID", b)
	}
	writer := o.Writer
	if err := writer.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("mount options: %w", err)
	}
	in := o.Ingest
	if err := in.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("mount options: %w", err)
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
