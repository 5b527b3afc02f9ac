package sql

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"

	"github.com/worldfs/worldfs/index"
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
	Compacted bool   `parquet:"compacted"`
	Object    string `parquet:"object"`
	Path      string `parquet:"path"`
	Rows      int64  `parquet:"rows"`
	Bytes     int64  `parquet:"bytes"`
	// FirstTick and LastTick bound the ticks of the rows a file read as it
	// is (proven) may show: its tick, or a compacted file's span within the
	// ticks the views keep. <table>_at(t) reads only the files whose bounds
	// hold t.
	FirstTick int64 `parquet:"first_tick"`
	LastTick  int64 `parquet:"last_tick"`
}

// compactedRow is one row of a list of the ticks whose manifests name
// compacted files (compacted.go): a tick's commit identity and the set of
// compacted files it names (Group), or, with TableID set, a member of
// such a set (one file of one table).
type compactedRow struct {
	World       string `parquet:"world,dict"`
	Run         string `parquet:"run,dict"`
	Tick        int64  `parquet:"tick"`
	CommitToken string `parquet:"commit_token"`
	WriterEpoch int64  `parquet:"writer_epoch"`
	Group       int32  `parquet:"grp"`
	TableID     string `parquet:"table_id,dict"`
	Object      string `parquet:"object,dict"`
}

// writeList writes the fragment list rows as a Parquet file in dir
// (writeRows). (worldfs gc collects the views' files named fragments-*.)
func writeList(dir string, rows []listRow) (string, error) {
	return writeRows(dir, index.ViewsFragments, rows, &snappy.Codec{}) // snappy: cheap to start, and the list is small
}

// writeCompacted writes a list of compacted ticks (writeRows),
// uncompressed: the rows are mostly random commit tokens, which snappy
// does not shrink, and compressing them cost more than the rest.
func writeCompacted(dir string, rows []compactedRow) (string, error) {
	return writeRows(dir, index.ViewsTicksFragments, rows, &uncompressed.Codec{})
}

// listRows are the rows of the lists the views read, each with every one
// of its fields as its list's name hashes it.
type listRows interface {
	listRow | compactedRow | tickRow
	appendKey([]byte) []byte
}

// writeRows writes rows as a Parquet file (with codec) in dir, named
// kind-<hash> by the hash of their schema and of every field of every
// row, so that a script naming a list always reads the rows it was built
// with, and a list whose rows did not change is only hashed: encoded and
// written only when no list of that name is there (an identical one
// there is reused). It returns the file's path.
func writeRows[R listRows](dir, kind string, rows []R, codec compress.Codec) (string, error) {
	var zero R
	h := sha256.New()
	buf := append([]byte(parquet.SchemaOf(zero).String()), 0)
	for _, r := range rows {
		buf = r.appendKey(buf)
		if len(buf) >= 32<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return reuseOrWrite(dir, index.ViewsFileName(kind, hex.EncodeToString(h.Sum(nil)[:16])), func() ([]byte, error) { return encodeList(rows, codec) })
}

// appendKey appends every field of r (listRows).
func (r listRow) appendKey(b []byte) []byte {
	b = appendStrings(b, r.View, r.World, r.Run, r.TableID, r.CommitToken, r.Object, r.Path)
	b = appendInts(b, int64(r.Part), r.Ord, r.Tick, r.WriterEpoch, r.Rows, r.Bytes, r.FirstTick, r.LastTick)
	return appendBools(b, r.Filtered, r.Fact, r.Proven, r.Compacted)
}

// appendKey appends every field of r (listRows).
func (r compactedRow) appendKey(b []byte) []byte {
	b = appendStrings(b, r.World, r.Run, r.CommitToken, r.TableID, r.Object)
	return appendInts(b, r.Tick, r.WriterEpoch, int64(r.Group))
}

// appendKey appends every field of r (listRows).
func (r tickRow) appendKey(b []byte) []byte {
	b = appendStrings(b, r.World, r.Run, r.CommitToken)
	return appendInts(b, r.Tick, r.PublishedMs, r.WriterEpoch)
}

func appendStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func appendInts(b []byte, ns ...int64) []byte {
	for _, n := range ns {
		b = binary.AppendVarint(b, n)
	}
	return b
}

func appendBools(b []byte, bs ...bool) []byte {
	for _, v := range bs {
		var c byte
		if v {
			c = 1
		}
		b = append(b, c)
	}
	return b
}

// encodeList encodes rows as Parquet with codec.
func encodeList[R listRows](rows []R, codec compress.Codec) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[R](&buf, parquet.Compression(codec))
	for lo := 0; lo < len(rows); lo += 1 << 16 {
		if _, err := w.Write(rows[lo:min(len(rows), lo+1<<16)]); err != nil {
			return nil, fmt.Errorf("fragment list: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("fragment list: %w", err)
	}
	return buf.Bytes(), nil
}

// reuseOrWrite returns the path of the file called name in dir: marked
// used if it is there, else written with data's bytes.
func reuseOrWrite(dir, name string, data func() ([]byte, error)) (string, error) {
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		touch(path) // in use again: collection counts from its last use
		return path, nil
	}
	b, err := data()
	if err != nil {
		return "", err
	}
	return path, writeAtomic(dir, path, b)
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
