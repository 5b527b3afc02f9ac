package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// MarkerFormat is the world marker's format version.
const MarkerFormat = 1

// Marker is a world's create-once marker, and its entry in the world
// directory: identity and lineage, nothing that ever changes.
type Marker struct {
	ID       string `json:"id"`
	Format   int    `json:"format"`
	Parent   string `json:"parent,omitempty"`
	ForkRun  string `json:"fork_run,omitempty"`
	ForkTick int64  `json:"fork_tick,omitempty"`
}

// DirectoryPrefix lists every world: one object per world, created with its
// marker and never changed.
const DirectoryPrefix = "directory/"

// CreateWorld creates a world: its marker, its directory entry, and the
// first slot, which holds world.create and the creator's fence.acquire. It
// returns the catalog open on the new world and the creator's writer epoch.
// A world that already exists is ErrWorldExists. A creator that crashed
// before the first slot may call it again with the same arguments; once the
// first slot exists the world is created and its writer must resume it.
func CreateWorld(ctx context.Context, b bucket.Bucket, world string, create WorldCreate, holder string, opts Options) (*Catalog, int64, error) {
	return CreateWorldThen(ctx, b, world, create, holder, opts, nil)
}

// ReservedWorldIDs are names a new world may not take: a mount's root
// holds files of those names (the root ctl and its refusals). A world an
// older worldfs created under one still opens.
var ReservedWorldIDs = []string{"ctl", "ctl.errors"}

// CreateWorldThen is CreateWorld that runs then once the name is this
// world's (its marker, which records the lineage, is in the bucket) and
// before the first slot creates the world. What must exist before the
// catalog names it (a fork's lineage rows) is written there: only by a
// creation whose marker won the name, or a retry with the same arguments,
// never by one refused because the world exists. A failing then creates
// no slot.
func CreateWorldThen(ctx context.Context, b bucket.Bucket, world string, create WorldCreate, holder string, opts Options, then func(context.Context) error) (*Catalog, int64, error) {
	if err := ValidateWorldID(world); err != nil {
		return nil, 0, err
	}
	if slices.Contains(ReservedWorldIDs, world) {
		return nil, 0, fmt.Errorf("world id %q is reserved: a mount's root holds a file of that name; choose another", world)
	}
	if create.Parent != "" {
		if err := ValidateWorldID(create.Parent); err != nil {
			return nil, 0, fmt.Errorf("parent: %w", err)
		}
	}
	if create.WriterMode == "" {
		create.WriterMode = ModeResumable
	}
	if create.CreatedUnixMs == 0 {
		create.CreatedUnixMs = time.Now().UnixMilli()
	}
	entries := []Entry{
		{Kind: KindWorldCreate, WorldCreate: &create},
		{Kind: KindFenceAcquire, FenceAcquire: &FenceAcquire{Holder: holder}},
	}
	// Refuse a bad request before the marker makes the name taken.
	for i := range entries {
		if err := entries[i].validate(); err != nil {
			return nil, 0, refused("world %s: %v", world, err)
		}
	}
	m := Marker{ID: world, Format: MarkerFormat, Parent: create.Parent, ForkRun: create.ForkRun, ForkTick: create.ForkTick}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, 0, err
	}
	// The marker is deterministic in the arguments: a retry after a crash
	// finds its own marker and carries on; a different world of that name
	// is ErrExist.
	if _, err := bucket.CreateOnce(ctx, b, MarkerName(world), data); err != nil {
		if errors.Is(err, bucket.ErrExist) {
			return nil, 0, fmt.Errorf("world %s: %w (with another lineage)", world, ErrWorldExists)
		}
		return nil, 0, fmt.Errorf("world %s: creating the marker: %w", world, err)
	}
	if _, err := bucket.CreateOnce(ctx, b, DirectoryPrefix+world, data); err != nil && !errors.Is(err, bucket.ErrExist) {
		return nil, 0, fmt.Errorf("world %s: creating the directory entry: %w", world, err)
	}
	if then != nil {
		if err := then(ctx); err != nil {
			return nil, 0, err
		}
	}
	c, err := Open(ctx, b, world, opts)
	if err != nil {
		return nil, 0, err
	}
	rs, err := c.CommitAll(ctx, entries...)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	return c, rs[1].Epoch, nil
}

// ListWorlds returns every world's marker, by id, from the world directory.
func ListWorlds(ctx context.Context, b bucket.Bucket) ([]Marker, error) {
	var out []Marker
	for a, err := range b.List(ctx, DirectoryPrefix, "") {
		if err != nil {
			return nil, err
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return nil, err
		}
		var m Marker
		if err := json.Unmarshal(data, &m); err != nil || m.ID != strings.TrimPrefix(a.Name, DirectoryPrefix) {
			return nil, fmt.Errorf("world directory entry %s: %w", a.Name, ErrCorrupt)
		}
		out = append(out, m)
	}
	return out, nil
}

// WorldEntry is one entry of the world directory as a listing gives it:
// the world's id and when its entry was created (as the world was; by the
// bucket's clock).
type WorldEntry struct {
	ID      string
	Created time.Time
}

// ListWorldEntries lists the world directory in id order from the
// listing alone, reading no object (ListWorlds reads every marker): what a
// reader that needs only the ids pays, whatever the number of worlds. An
// entry whose name is no world id is ErrCorrupt.
func ListWorldEntries(ctx context.Context, b bucket.Bucket) ([]WorldEntry, error) {
	var out []WorldEntry
	for a, err := range b.List(ctx, DirectoryPrefix, "") {
		if err != nil {
			return nil, err
		}
		id := strings.TrimPrefix(a.Name, DirectoryPrefix)
		if ValidateWorldID(id) != nil {
			return nil, fmt.Errorf("world directory entry %s: %w", a.Name, ErrCorrupt)
		}
		out = append(out, WorldEntry{ID: id, Created: a.Created})
	}
	return out, nil
}

// ReadMarker reads world's marker; a world never created is
// bucket.ErrNotExist.
func ReadMarker(ctx context.Context, b bucket.Bucket, world string) (Marker, error) {
	var m Marker
	data, _, err := b.Get(ctx, MarkerName(world))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil || m.ID != world || m.Format != MarkerFormat {
		return m, fmt.Errorf("world %s: marker: %w", world, ErrCorrupt)
	}
	return m, nil
}
