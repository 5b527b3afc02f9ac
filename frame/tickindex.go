package frame

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// A tick's file of a table is canonical: the bytes EncodeFragment writes
// for the tick's visible rows, in entity order, each row with the commit
// stamp it carries. The writer publishes exactly that file. Compaction
// moves the rows into a larger file ordered by (tick, entity) and writes,
// beside it, a tick index: for each tick with rows there, where its rows
// are and the size and sha256 of its canonical file. A reader then knows
// a compacted tick's file size without reading a row, and rebuilds the
// file from the tick's rows alone (TickFile), byte for byte the fragment
// the writer published, checked against the index.

// ErrNoTickIndex: a compacted file has no tick index this build can use
// (written before tick indexes, or by an encoder that writes other bytes).
// A reader derives such a tick's file some other way.
var ErrNoTickIndex = errors.New("no tick index")

// TickEntry is one tick of a compacted file as its tick index records it.
type TickEntry struct {
	Tick int64
	Row  int64 // the tick's first row in the compacted file
	Rows int64
	// Size and Digest (sha256) of the tick's canonical file.
	Size   int64
	Digest [sha256.Size]byte
	// CSVSize is the size of the tick's CSV rendering (WriteCSV); 0 if the
	// index does not record it (written before CSV sizes were).
	CSVSize int64
	// CSVInFooter: the canonical file records CSVSize in its footer, as
	// EncodeFragment writes it; false for a tick whose writer did not (it
	// wrote before CSV sizes were recorded), so that the file rebuilt is
	// still the one it published.
	CSVInFooter bool
}

// TickIndex is the tick index of one compacted file.
type TickIndex struct {
	Version  int               // of the format: 1 (no CSV sizes), 2 (no summaries) or 3
	File     [sha256.Size]byte // the compacted file's sha256
	Encoding [sha256.Size]byte // the encoder's fingerprint (see encodingID)
	Rows     int64             // the compacted file's rows
	// Ticks in ascending order, their rows contiguous from row 0: only
	// ticks with rows in the file.
	Ticks []TickEntry
	// Summaries (format 3) are the file's numeric component columns
	// summarized per tick (summary.go), in the table's column order.
	Summaries []ColumnSummary
}

// Entry returns tick n's entry; false if the file holds no row of n.
func (x *TickIndex) Entry(n int64) (TickEntry, bool) {
	i, ok := slices.BinarySearchFunc(x.Ticks, n, func(e TickEntry, n int64) int {
		switch {
		case e.Tick < n:
			return -1
		case e.Tick > n:
			return 1
		}
		return 0
	})
	if !ok {
		return TickEntry{}, false
	}
	return x.Ticks[i], true
}

// The tick index's bytes: magic, the compacted file's sha256, the
// encoder's fingerprint, the file's rows and the count of entries
// (uvarints), then per entry the tick (the first as is, then the distance
// from the one before), its rows, its file's size and (version 2 on) its
// CSV size times two plus one if the file records it in its footer
// (uvarints) and the file's sha256, then (version 3) the column summaries
// (appendSummaries), and last the sha256 of everything before it. A
// tick's first row is the sum of the rows before it. Versions 1 (written
// before CSV sizes) and 2 (before summaries) are read too; version 3 is
// written.
var tickIndexMagics = map[int]string{3: "worldfs-ticks/3\n", 2: "worldfs-ticks/2\n", 1: "worldfs-ticks/1\n"}

// TickIndexVersion is the format Encode writes.
const TickIndexVersion = 3

// tickIndexMagic is the current format's magic.
var tickIndexMagic = tickIndexMagics[TickIndexVersion]

// Encode returns the tick index's bytes (of the current format, 3), as
// ReadTickIndex reads them.
func (x *TickIndex) Encode() []byte {
	out := make([]byte, 0, len(tickIndexMagic)+3*sha256.Size+20+len(x.Ticks)*(sha256.Size+8))
	out = append(out, tickIndexMagic...)
	out = append(out, x.File[:]...)
	out = append(out, x.Encoding[:]...)
	out = binary.AppendUvarint(out, uint64(x.Rows))
	out = binary.AppendUvarint(out, uint64(len(x.Ticks)))
	prev := int64(0)
	for _, e := range x.Ticks {
		out = binary.AppendUvarint(out, uint64(e.Tick-prev))
		out = binary.AppendUvarint(out, uint64(e.Rows))
		out = binary.AppendUvarint(out, uint64(e.Size))
		footer := uint64(0)
		if e.CSVInFooter {
			footer = 1
		}
		out = binary.AppendUvarint(out, uint64(e.CSVSize)<<1|footer)
		out = append(out, e.Digest[:]...)
		prev = e.Tick
	}
	out = appendSummaries(out, x.Summaries)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// DecodeTickIndex parses a tick index, refusing (index.ErrCorrupt) one
// whose checksum, length or entries are wrong.
func DecodeTickIndex(data []byte) (*TickIndex, error) {
	corrupt := func(what string, args ...any) error {
		return fmt.Errorf("tick index: %s: %w", fmt.Sprintf(what, args...), index.ErrCorrupt)
	}
	x := &TickIndex{}
	if len(data) < len(tickIndexMagic)+3*sha256.Size {
		return nil, corrupt("not a tick index")
	}
	for v, magic := range tickIndexMagics {
		if string(data[:len(magic)]) == magic {
			x.Version = v
		}
	}
	if x.Version == 0 {
		return nil, corrupt("not a tick index")
	}
	body := data[:len(data)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, corrupt("checksum mismatch")
	}
	p := body[len(tickIndexMagic):]
	copy(x.File[:], p)
	copy(x.Encoding[:], p[sha256.Size:])
	p = p[2*sha256.Size:]
	// uvarint reads one number, at most max.
	bad := false
	uvarint := func(max uint64) int64 {
		v, k := binary.Uvarint(p)
		if k <= 0 || v > max {
			bad = true
			return 0
		}
		p = p[k:]
		return int64(v)
	}
	x.Rows = uvarint(math.MaxInt64)
	n := uvarint(uint64(len(p)) / (sha256.Size + 3))
	if bad {
		return nil, corrupt("a bad header")
	}
	x.Ticks = make([]TickEntry, n)
	row, tick := int64(0), int64(0)
	for i := range x.Ticks {
		e := &x.Ticks[i]
		d := uvarint(uint64(math.MaxInt64 - tick))
		e.Rows = uvarint(uint64(math.MaxInt64 - row))
		e.Size = uvarint(math.MaxInt64)
		if x.Version >= 2 {
			csv := uvarint(math.MaxInt64)
			e.CSVSize, e.CSVInFooter = csv>>1, csv&1 == 1
		}
		if bad || len(p) < sha256.Size || i > 0 && d == 0 || e.Rows == 0 || e.Size == 0 {
			return nil, corrupt("entry %d is not one", i)
		}
		copy(e.Digest[:], p)
		p = p[sha256.Size:]
		tick += d
		e.Tick, e.Row = tick, row
		row += e.Rows
	}
	if x.Version >= 3 {
		var ok bool
		if x.Summaries, p, ok = decodeSummaries(p, len(x.Ticks)); !ok {
			return nil, corrupt("the column summaries are not ones")
		}
	}
	if len(p) != 0 {
		return nil, corrupt("%d bytes past the entries", len(p))
	}
	if row != x.Rows {
		return nil, corrupt("entries hold %d rows, the file %d", row, x.Rows)
	}
	return x, nil
}

// ReadTickIndex reads the tick index of the compacted file f records (of
// the newest format it has one of: index.TickIndexPaths) and checks it:
// against its own checksum, and that it describes f (its sha256 and
// rows). A file without one, or with one another encoder wrote, is
// ErrNoTickIndex; a damaged one is index.ErrCorrupt.
func ReadTickIndex(ctx context.Context, b bucket.Bucket, f index.Fragment) (*TickIndex, error) {
	if f.Span == nil {
		return nil, fmt.Errorf("%s is not a compacted file: %w", f.Path, ErrNoTickIndex)
	}
	var name string
	var data []byte
	err := bucket.ErrNotExist
	names := index.TickIndexPaths(f.Path)
	version := TickIndexVersion + 1
	for i := 0; i < len(names) && errors.Is(err, bucket.ErrNotExist); i++ {
		name, version = names[i], version-1
		data, _, err = b.Get(ctx, name)
	}
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", f.Path, ErrNoTickIndex)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	x, err := DecodeTickIndex(data)
	if err == nil && x.Version != version {
		err = fmt.Errorf("tick index: format %d under the name of format %d: %w", x.Version, version, index.ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if "sha256:"+hex.EncodeToString(x.File[:]) != f.Digest || x.Rows != f.Rows {
		return nil, fmt.Errorf("%s describes another file than %s (%d rows, %s): %w", name, f.Path, f.Rows, f.Digest, index.ErrCorrupt)
	}
	id, err := encodingID(x.Version)
	if err != nil {
		return nil, err
	}
	if x.Encoding != id {
		return nil, fmt.Errorf("%s: written by an encoder of other bytes: %w", name, ErrNoTickIndex)
	}
	return x, nil
}

// TickFileMismatchError: the bytes rebuilt for a compacted tick are not
// those its tick index records (a damaged compacted file or index). It is
// index.ErrCorrupt.
type TickFileMismatchError struct {
	Tick       int64
	Size, Want int64
}

func (e *TickFileMismatchError) Error() string {
	return fmt.Sprintf("tick %d: rebuilt %d bytes that do not match the tick index (%d bytes)", e.Tick, e.Size, e.Want)
}

func (e *TickFileMismatchError) Unwrap() error { return index.ErrCorrupt }

// TickFile returns the canonical file of tick e.Tick of table t, rebuilt
// from its compacted file (src, size bytes; its tick index gave e): it
// reads only the tick's rows (its row groups, and in them the pages the
// offset index places at its rows) and checks the bytes against e's size
// and sha256, failing closed (TickFileMismatchError) on any difference.
func TickFile(t *Table, src io.ReaderAt, size int64, e TickEntry) ([]byte, error) {
	file, err := openCompacted(t, src, size)
	if err != nil {
		return nil, err
	}
	return tickFile(t, file, e)
}

// tickFile is TickFile of the opened compacted file.
func tickFile(t *Table, file *parquet.File, e TickEntry) ([]byte, error) {
	var err error
	var data []byte
	n := 0
	err = ScanTicks(t, file, e.Row, e.Rows, func(tick, row int64, f *Frame, stamps []Stamp) error {
		n++
		if tick != e.Tick || row != e.Row || int64(f.Len()) != e.Rows {
			return fmt.Errorf("rows %d..%d hold tick %d, the tick index says tick %d: %w", e.Row, e.Row+e.Rows, tick, e.Tick, index.ErrCorrupt)
		}
		data, _, err = Encode(f, func(i int) Stamp { return stamps[i] }, e.csvMode(), e.CSVSize)
		return err
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("rows %d..%d hold %d ticks, the tick index says one: %w", e.Row, e.Row+e.Rows, n, index.ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("table %s tick %d: %w", t.Name, e.Tick, err)
	}
	if int64(len(data)) != e.Size || sha256.Sum256(data) != e.Digest {
		return nil, fmt.Errorf("table %s: %w", t.Name, &TickFileMismatchError{Tick: e.Tick, Size: int64(len(data)), Want: e.Size})
	}
	return data, nil
}

// csvMode is how the tick's canonical file was encoded.
func (e TickEntry) csvMode() CSVMode {
	if e.CSVInFooter {
		return CSVRecord
	}
	return CSVNone
}

// EmptyTickFile is the canonical file of a tick without rows of table t
// (a tick that no compacted file of its window holds a row of).
func EmptyTickFile(t *Table) ([]byte, error) {
	return EncodeFragment(NewFrame(t), Stamp{})
}

// BuildTickIndex computes the tick index of data, a compacted file of t
// whose ticks are runs (each tick's first row and rows): a tick known
// (from the index of the file its rows came from, with as many rows)
// keeps its entry; the others' rows are read, each stretch of them in one
// pass, and encoded as their canonical files, measured (with their CSV
// renderings) and hashed. A tick in unrecorded came from a fragment whose
// writer recorded no CSV size in its footer, and its canonical file has
// none either. Every tick's numeric columns are summarized from data
// (summarize: a pass over those columns alone). It returns how many ticks
// it encoded.
func BuildTickIndex(t *Table, data []byte, runs []TickEntry, known map[int64]TickEntry, unrecorded map[int64]bool) (*TickIndex, int, error) {
	id, err := encodingID(2)
	if err != nil {
		return nil, 0, err
	}
	x := &TickIndex{Version: TickIndexVersion, File: sha256.Sum256(data), Encoding: id, Ticks: runs}
	for _, e := range runs {
		x.Rows += e.Rows
	}
	file, err := openCompacted(t, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, 0, err
	}
	if file.NumRows() != x.Rows {
		return nil, 0, fmt.Errorf("table %s: tick index: the file has %d rows, its ticks %d", t.Name, file.NumRows(), x.Rows)
	}
	if x.Summaries, err = summarize(t, file, runs); err != nil {
		return nil, 0, fmt.Errorf("table %s: tick index: %w", t.Name, err)
	}
	encoded := 0
	for i := 0; i < len(runs); {
		if k, ok := known[runs[i].Tick]; ok && k.Rows == runs[i].Rows {
			runs[i].Size, runs[i].Digest, runs[i].CSVSize, runs[i].CSVInFooter = k.Size, k.Digest, k.CSVSize, k.CSVInFooter
			i++
			continue
		}
		j := i + 1 // runs[i:j]: a stretch of ticks to encode
		for j < len(runs) {
			if k, ok := known[runs[j].Tick]; ok && k.Rows == runs[j].Rows {
				break
			}
			j++
		}
		next := i
		from, n := runs[i].Row, runs[j-1].Row+runs[j-1].Rows-runs[i].Row
		err := ScanTicks(t, file, from, n, func(tick, row int64, f *Frame, stamps []Stamp) error {
			if next >= j {
				return fmt.Errorf("rows from %d hold tick %d, past the ticks the compaction wrote there", row, tick)
			}
			e := &runs[next]
			if tick != e.Tick || row != e.Row || int64(f.Len()) != e.Rows {
				return fmt.Errorf("rows from %d hold tick %d, the compaction wrote tick %d there", row, tick, e.Tick)
			}
			if _, err := e.measure(f, stamps, !unrecorded[tick]); err != nil {
				return err
			}
			next++
			return nil
		})
		if err == nil && next != j {
			err = fmt.Errorf("rows %d..%d hold %d ticks, the compaction wrote %d", from, from+n, next-i, j-i)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("table %s: tick index: %w", t.Name, err)
		}
		encoded += j - i
		i = j
	}
	return x, encoded, nil
}

// IndexCompactedFile computes the tick index of data, a compacted file of
// t, every tick encoded but those known (with as many rows: the entries
// of an older index of the file): the index compaction writes for the
// file when it is a source of its own.
func IndexCompactedFile(t *Table, data []byte, known map[int64]TickEntry) (*TickIndex, error) {
	file, err := openCompacted(t, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	runs, err := tickRunsOf(t, file, nil)
	if err != nil {
		return nil, err
	}
	x, _, err := BuildTickIndex(t, data, runs, known, nil)
	return x, err
}

// measure encodes f, the rows of e's tick with their stamps, as the
// tick's canonical file (its footer recording its CSV size if record, as
// a fragment's writer records it since CSV sizes are: CSVRecord)
// and fills e's size, sha256 and CSV size from it: what a tick index
// records of the tick. It returns the file.
func (e *TickEntry) measure(f *Frame, stamps []Stamp, record bool) ([]byte, error) {
	mode := CSVCount
	if record {
		mode = CSVRecord
	}
	enc, csv, err := Encode(f, func(i int) Stamp { return stamps[i] }, mode, 0)
	if err != nil {
		return nil, err
	}
	e.Size, e.Digest, e.CSVSize, e.CSVInFooter = int64(len(enc)), sha256.Sum256(enc), csv, record
	return enc, nil
}

// WriteTickIndex stores x, the tick index of the compacted file f, beside
// it (index.TickIndexPath), durably, under a name created once: an
// index already there of other bytes is not replaced (bucket.ErrExist).
// It returns the bytes written.
func WriteTickIndex(ctx context.Context, b bucket.Bucket, f index.Fragment, x *TickIndex) (int64, error) {
	enc := x.Encode()
	name := index.TickIndexPath(f.Path)
	if _, err := bucket.CreateOnce(ctx, b, name, enc); err != nil {
		return 0, fmt.Errorf("writing %s: %w", name, err)
	}
	return int64(len(enc)), nil
}

// tickRunsOf returns the ticks of file, a compacted file of t, as entries
// without a size (each tick, its first row and its rows), from its tick
// column alone (told first to a Prefetcher src); rows out of tick order
// are index.ErrCorrupt.
func tickRunsOf(t *Table, file *parquet.File, src io.ReaderAt) ([]TickEntry, error) {
	col := t.Column(ColTick)
	if col < 0 {
		return nil, fmt.Errorf("table %s has no %s column", t.Name, ColTick)
	}
	if p, ok := src.(Prefetcher); ok {
		var ranges []ByteRange
		for _, rg := range file.Metadata().RowGroups {
			md := rg.Columns[col].MetaData
			start := md.DataPageOffset
			if d := md.DictionaryPageOffset; d > 0 && d < start {
				start = d
			}
			ranges = append(ranges, ByteRange{start, md.TotalCompressedSize})
		}
		if len(ranges) > 0 {
			if err := p.Prefetch(ranges); err != nil {
				return nil, err
			}
		}
	}
	runs, err := tickRuns(file, col)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return runs, nil
}

// tickRuns returns the ticks of file's tick column (col) as entries
// without a size: each tick, its first row and its rows. Rows out of
// tick order, or a column of other than every row, are index.ErrCorrupt.
func tickRuns(file *parquet.File, col int) ([]TickEntry, error) {
	var runs []TickEntry
	row := int64(0)
	for _, rg := range file.RowGroups() {
		if k := rg.ColumnChunks()[col].Type().Kind(); k != parquet.Int64 {
			return nil, fmt.Errorf("the tick column holds %s values: %w", k, index.ErrCorrupt)
		}
		err := numericPages(rg, col, parquet.Int64, func(ticks []int64, _ []float64) error {
			for _, tick := range ticks {
				switch n := len(runs); {
				case n > 0 && runs[n-1].Tick == tick:
					runs[n-1].Rows++
				case n > 0 && runs[n-1].Tick > tick:
					return fmt.Errorf("row %d holds tick %d after tick %d: %w", row, tick, runs[n-1].Tick, index.ErrCorrupt)
				default:
					runs = append(runs, TickEntry{Tick: tick, Row: row, Rows: 1})
				}
				row++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("the tick column: %w", err)
		}
	}
	if row != file.NumRows() {
		return nil, fmt.Errorf("the tick column holds %d values, the file %d rows: %w", row, file.NumRows(), index.ErrCorrupt)
	}
	return runs, nil
}

// openCompacted opens a compacted file of t (its page index too, so that
// a seek to a row skips the pages before it), refusing one of another
// schema.
func openCompacted(t *Table, src io.ReaderAt, size int64) (*parquet.File, error) {
	file, err := parquet.OpenFile(src, size, parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("table %s: compacted file: %w", t.Name, err)
	}
	if err := SameColumns(t, file); err != nil {
		return nil, fmt.Errorf("table %s: compacted file: %w", t.Name, err)
	}
	return file, nil
}

// encodingID fingerprints the encoder as a tick index of version v
// records it: the sha256 of the canonical file of a fixed frame of every
// column type (v1), and (v2) of it and of its file with the CSV size in
// its footer. A tick index records the fingerprint of the encoder that
// measured its files; one whose fingerprint differs from this build's
// (another parquet-go, another codec level or page size) is not used, as
// its sizes would not be the bytes this build rebuilds.
func encodingID(v int) ([sha256.Size]byte, error) {
	probe.once.Do(func() {
		probe.id, probe.idCSV, probe.err = func() (id, idCSV [sha256.Size]byte, err error) {
			c, err := NewComponent("probe", Field{Name: "f64", Type: Float64}, Field{Name: "f32", Type: Float32}, Field{Name: "i64", Type: Int64},
				Field{Name: "i32", Type: Int32}, Field{Name: "b", Type: Bool}, Field{Name: "s", Type: String})
			if err != nil {
				return id, idCSV, err
			}
			t, err := NewTable("probe", c)
			if err != nil {
				return id, idCSV, err
			}
			f := NewFrame(t)
			for e := range int64(3) {
				v := Values{"probe_f64": float64(e) / 3, "probe_f32": float32(e) / 7, "probe_i64": e << 40,
					"probe_i32": int32(-e), "probe_b": e%2 == 0, "probe_s": strings.Repeat("x", int(e))}
				if err := f.Append(e, v); err != nil {
					return id, idCSV, err
				}
			}
			stamp := func(int) Stamp { return Stamp{Tick: 1, CommitToken: "probe", WriterEpoch: 1} }
			plain, _, err := Encode(f, stamp, CSVNone, 0)
			if err != nil {
				return id, idCSV, fmt.Errorf("the encoder's fingerprint: %w", err)
			}
			withCSV, _, err := Encode(f, stamp, CSVRecord, 0)
			if err != nil {
				return id, idCSV, fmt.Errorf("the encoder's fingerprint: %w", err)
			}
			return sha256.Sum256(plain), sha256.Sum256(append(plain, withCSV...)), nil
		}()
	})
	if v == 1 {
		return probe.id, probe.err
	}
	return probe.idCSV, probe.err
}

var probe struct {
	once      sync.Once
	id, idCSV [sha256.Size]byte
	err       error
}
