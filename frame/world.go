package frame

import (
	"maps"

	"github.com/worldfs/worldfs/index"
)

// The JSON documents worldfs shows of a world and of a tick: the mount's
// world.json and manifest.json, and the world records of worldfs worlds,
// worldfs world --json and the web interface, which share WorldRecord.

// WorldRecord is a world's catalog record as every document of the world
// shows it (each adds its runs).
type WorldRecord struct {
	ID            string `json:"id"`
	Parent        string `json:"parent,omitempty"`
	ForkRun       string `json:"fork_run,omitempty"`
	ForkTick      *int64 `json:"fork_tick,omitempty"` // set for a fork
	Status        string `json:"status"`
	WriterMode    string `json:"writer_mode"`
	CreatedUnixMs int64  `json:"created_unix_ms"`
	Epoch         int64  `json:"fence_epoch"`
	FenceHolder   string `json:"fence_holder"`
	Seq           uint64 `json:"catalog_seq"` // of the catalog state read
	// Meta is the world's run parameters (index.World.Meta): immutable,
	// set at its creation or fork.
	Meta map[string]string `json:"meta,omitempty"`
}

// RecordOf is w's record, read from a catalog state at sequence seq.
func RecordOf(w index.World, seq uint64) WorldRecord {
	r := WorldRecord{ID: w.ID, Parent: w.Parent, ForkRun: w.ForkRun, Status: w.Status, WriterMode: w.WriterMode,
		CreatedUnixMs: w.CreatedUnixMs, Epoch: w.Epoch, FenceHolder: w.FenceHolder, Seq: seq, Meta: maps.Clone(w.Meta)}
	if w.Parent != "" {
		ft := w.ForkTick
		r.ForkTick = &ft
	}
	return r
}

// WorldJSON is the mount's world.json: the world's record, the head of
// its main run, each run's head and published ticks, and the lineage of
// its main run, oldest first.
type WorldJSON struct {
	WorldRecord
	Head    *int64             `json:"head"` // of the main run; null: none
	Runs    map[string]RunHead `json:"runs"`
	Lineage []LineageSegment   `json:"lineage"`
}

// RunHead is one run of world.json.
type RunHead struct {
	Head      *int64 `json:"head"` // null: no visible tick
	Published int64  `json:"published"`
}

// LineageSegment is one world of world.json's lineage: its run, the last
// tick of it the world reads (null for the world itself) and its
// visibility mode.
type LineageSegment struct {
	World string `json:"world"`
	Run   string `json:"run"`
	UpTo  *int64 `json:"up_to_tick"`
	Mode  string `json:"visibility"`
}

// TickManifest is a tick's manifest.json: the tick, its commit, and per
// table its rows and its Parquet file beside the manifest.
type TickManifest struct {
	World       string          `json:"world"`
	Run         string          `json:"run"`
	Tick        int64           `json:"tick"`
	CommitToken string          `json:"commit_token"`
	WriterEpoch int64           `json:"writer_epoch"`
	Tables      []ManifestTable `json:"tables"`
}

// ManifestTable is one table of a tick's manifest.
type ManifestTable struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Rows is the tick's rows of the table (null where worldfs cannot
	// tell without reading them: a split tick with rows in a compacted
	// file).
	Rows *int64 `json:"rows"`
	// Parquet is the table's Parquet file beside the manifest.
	Parquet *ManifestFile `json:"parquet"`
}

// ManifestFile is a file of a tick as its manifest describes it.
type ManifestFile struct {
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest,omitempty"` // "sha256:<hex>" of its bytes
}
