package sql

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// listRow is one row of a fragment list: a file a view reads, and the
// commit identity its manifest published (none for unfiltered and legacy
// history).
type listRow struct {
	View        string `parquet:"view,dict"`
	Part        int32  `parquet:"part"` // which read_parquet of the view (one per world and table id)
	Ord         int64  `parquet:"ord"`  // the file's place in that read_parquet's list
	World       string `parquet:"world,dict"`
	Run         string `parquet:"run,dict"`
	TableID     string `parquet:"table_id,dict"`
	Tick        int64  `parquet:"tick"`
	CommitToken string `parquet:"commit_token"`
	WriterEpoch int64  `parquet:"writer_epoch"`
	Filtered    bool   `parquet:"filtered"`
	Fact        bool   `parquet:"fact"`   // a completed claim's rows, not a tick's
	Proven      bool   `parquet:"proven"` // filtered, and the catalog proves every row is (tick, commit_token)
	// Compacted: a compacted file, holding the visible rows of many ticks.
	Compacted bool `parquet:"compacted"`
	// Manifest: not a file to read but a member of a set of compacted
	// files that ticks name (Group; rows -1: unknown), for worldfs_manifests.
	Manifest bool   `parquet:"manifest"`
	Group    int32  `parquet:"grp"`
	Object   string `parquet:"object"`
	Path     string `parquet:"path"`
	Rows     int64  `parquet:"rows"`
	// FirstTick and LastTick bound the ticks of the rows a file read as it
	// is (proven) may show: its tick, or a compacted file's span within the
	// ticks the views keep. <table>_at(t) reads only the files whose bounds
	// hold t.
	FirstTick int64 `parquet:"first_tick"`
	LastTick  int64 `parquet:"last_tick"`
}

// tickRow is one row of a list of ticks whose manifests name compacted
// files: the tick's commit identity and the set of compacted files it
// names (the fragment list's manifest rows of that group).
type tickRow struct {
	World       string `parquet:"world,dict"`
	Run         string `parquet:"run,dict"`
	Tick        int64  `parquet:"tick"`
	CommitToken string `parquet:"commit_token"`
	WriterEpoch int64  `parquet:"writer_epoch"`
	Group       int32  `parquet:"grp"`
}

// writeList writes rows as a Parquet file in dir named by prefix and the
// hash of its bytes, so that a script naming it always reads what it was
// built with; an identical list already there is reused. It returns the
// file's path. (worldfs gc collects the views' files named fragments-*.)
func writeList[R listRow | tickRow](dir, prefix string, rows []R) (string, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[R](&buf, parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}))
	for lo := 0; lo < len(rows); lo += 1 << 16 {
		if _, err := w.Write(rows[lo:min(len(rows), lo+1<<16)]); err != nil {
			return "", fmt.Errorf("fragment list: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("fragment list: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	path := filepath.Join(dir, prefix+hex.EncodeToString(sum[:16])+".parquet")
	if _, err := os.Stat(path); err == nil {
		touch(path) // in use again: collection counts from its last use
		return path, nil
	}
	return path, writeAtomic(dir, path, buf.Bytes())
}

// writeAtomic writes data to path in dir through a temporary file and a
// rename: readers see the whole file or none; racing writers write
// identical bytes.
func writeAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// touch marks a views file (fragment list, witness) as used now: worldfs
// gc removes those unused for its retention, and a printed views script
// must keep working that long after it was last built.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}
