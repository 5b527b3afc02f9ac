package iceberg

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
)

// how says what exporting a file took.
type how int

const (
	inPlace how = iota // named as it is (or left out)
	rewrote            // its visible rows written to a filtered copy
	reused             // the filtered copy an earlier export wrote serves
)

// file decides how file f of table t is exported: in place, or its
// visible rows only in a copy under the table's data/ (ok false: it holds
// no visible row).
func (e *exporter) file(ctx context.Context, t *table, loc string, f index.File, prev map[string]entry) (df dataFile, ok bool, h how, err error) {
	key := f.World + "/" + f.Table
	switch {
	case f.Span != nil && f.Keep != nil && (f.Keep.From > f.Span.From || f.Keep.To < f.Span.To):
		// A compacted file the view keeps only part of (a fork's parent
		// compacted past the fork point): its kept rows, written once.
		keep := *f.Keep
		h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%d", f.Path, keep.From, keep.To)))
		name := index.IcebergKeptName(loc, hex.EncodeToString(h[:16]))
		if pe, ok := prev[e.uri(name)]; ok {
			return dataFile{uri: pe.uri, rows: pe.rows, size: pe.size, lo: max(f.Span.From, keep.From), hi: min(f.Span.To, keep.To)}, pe.rows > 0, reused, nil
		}
		return e.filtered(ctx, f, name, func(tick int64, _ string, _ int64) bool { return keep.Contains(tick) })
	case f.Span != nil:
		return dataFile{uri: e.uri(f.Path), rows: f.Rows, size: f.Bytes, lo: f.Span.From, hi: f.Span.To}, f.Rows > 0, inPlace, nil
	case !f.Check:
		return dataFile{uri: e.uri(f.Path), rows: f.Rows, size: f.Bytes, lo: f.Tick, hi: f.Tick}, f.Rows > 0, inPlace, nil
	}
	// A file the catalog does not prove: the row rule (index.RowRule),
	// as the views apply it. Rows published under their (tick, token), and
	// epoch-0 history, are visible.
	visible := t.visible[key]
	return e.checked(ctx, loc, f, func(tick int64, token string, epoch int64) bool {
		return index.RowRule.Eval(index.Stamp{Tick: tick, Token: token, Epoch: epoch}, visible)
	})
}

// filtered exports the rows of f that keep accepts under name: f in place
// if it accepts every row, a filtered copy if some, nothing if none.
func (e *exporter) filtered(ctx context.Context, f index.File, name string, keep func(int64, string, int64) bool) (dataFile, bool, how, error) {
	data, err := e.read(ctx, f)
	if err != nil {
		return dataFile{}, false, inPlace, err
	}
	out, kept, total, lo, hi, err := filterParquet(data, keep)
	switch {
	case err != nil:
		return dataFile{}, false, inPlace, fmt.Errorf("%s: %w", f.Path, err)
	case kept == 0:
		return dataFile{}, false, inPlace, nil
	case kept == total:
		return dataFile{uri: e.uri(f.Path), rows: kept, size: f.Bytes, lo: lo, hi: hi}, true, inPlace, nil
	}
	size, err := put(ctx, e.b, name, out)
	if err != nil {
		return dataFile{}, false, inPlace, err
	}
	return dataFile{uri: e.uri(name), rows: kept, size: size, lo: lo, hi: hi}, true, rewrote, nil
}

// read reads f, checked against its catalog record by the readers' one
// rule (cache.Record): its bytes decide, whatever its generation (a
// copied bucket exports as the original).
func (e *exporter) read(ctx context.Context, f index.File) ([]byte, error) {
	data, _, err := e.b.Get(ctx, f.Path)
	if err != nil {
		return nil, err
	}
	r := cache.Record{Name: f.Path, Size: f.Bytes, Generation: f.Generation, Digest: f.Digest}
	if err := r.CheckData("", data); err != nil {
		return nil, fmt.Errorf("%w (%w)", err, index.ErrCorrupt)
	}
	return data, nil
}

// stamps is what a row check of a file found, recorded once per file
// (the file never changes) under the table's checks/: how many rows carry
// each (tick, token, epoch). The next export decides from it, unread,
// which rows are visible now (claims complete, so the answer can grow),
// and names the filtered copy by that answer, so a copy already written
// serves again.
type stamps struct {
	Source string      `json:"source"`
	Digest string      `json:"digest,omitempty"`
	Rows   int64       `json:"rows"`
	Stamps []rowsStamp `json:"stamps"`
}

type rowsStamp struct {
	Tick  int64  `json:"tick"`
	Token string `json:"token"`
	Epoch int64  `json:"epoch"`
	Rows  int64  `json:"rows"`
}

func stampsName(loc string, f index.File) string {
	h := sha256.Sum256([]byte(f.Path + "\n" + f.Digest))
	return index.IcebergStampsName(loc, hex.EncodeToString(h[:16]))
}

// checkedName names the filtered copy of f holding the rows of kept.
func checkedName(loc string, f index.File, kept []rowsStamp) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", f.Path, f.Digest)
	for _, s := range kept {
		fmt.Fprintf(h, "%d %q %d\n", s.Tick, s.Token, s.Epoch)
	}
	return index.IcebergCheckedName(loc, hex.EncodeToString(h.Sum(nil)[:16]))
}

// checked exports the rows of f that visible accepts: f in place if it
// accepts every row, a filtered copy if some, nothing if none. A file
// checked before is decided from its stamps record, and a filtered copy
// of the same rows already written is reused: neither is read again.
func (e *exporter) checked(ctx context.Context, loc string, f index.File, visible func(int64, string, int64) bool) (dataFile, bool, how, error) {
	rec, err := e.readStamps(ctx, loc, f)
	if err != nil {
		return dataFile{}, false, inPlace, err
	}
	var data []byte
	if rec == nil {
		if data, err = e.read(ctx, f); err != nil {
			return dataFile{}, false, inPlace, err
		}
		if rec, err = stampsOf(data); err != nil {
			return dataFile{}, false, inPlace, fmt.Errorf("%s: %w", f.Path, err)
		}
		rec.Source, rec.Digest = f.Path, f.Digest
		js, _ := json.Marshal(rec)
		if _, err := put(ctx, e.b, stampsName(loc, f), js); err != nil {
			return dataFile{}, false, inPlace, err
		}
	}
	var kept []rowsStamp
	var rows int64
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range rec.Stamps {
		if visible(s.Tick, s.Token, s.Epoch) {
			kept = append(kept, s)
			rows += s.Rows
			lo, hi = min(lo, s.Tick), max(hi, s.Tick)
		}
	}
	switch {
	case rows == 0:
		return dataFile{}, false, inPlace, nil
	case rows == rec.Rows:
		return dataFile{uri: e.uri(f.Path), rows: rows, size: f.Bytes, lo: lo, hi: hi}, true, inPlace, nil
	}
	name := checkedName(loc, f, kept)
	if data == nil {
		a, err := e.b.Stat(ctx, name)
		if err == nil {
			return dataFile{uri: e.uri(name), rows: rows, size: a.Size, lo: lo, hi: hi}, true, reused, nil
		}
		if !errors.Is(err, bucket.ErrNotExist) {
			return dataFile{}, false, inPlace, err
		}
		if data, err = e.read(ctx, f); err != nil {
			return dataFile{}, false, inPlace, err
		}
	}
	out, n, _, _, _, err := filterParquet(data, visible)
	if err != nil {
		return dataFile{}, false, inPlace, fmt.Errorf("%s: %w", f.Path, err)
	}
	if n != rows {
		return dataFile{}, false, inPlace, fmt.Errorf("%s: %d visible rows, its stamps record %s says %d: %w", f.Path, n, stampsName(loc, f), rows, ErrCorrupt)
	}
	size, err := put(ctx, e.b, name, out)
	if err != nil {
		return dataFile{}, false, inPlace, err
	}
	return dataFile{uri: e.uri(name), rows: rows, size: size, lo: lo, hi: hi}, true, rewrote, nil
}

// readStamps reads f's stamps record (nil: none yet).
func (e *exporter) readStamps(ctx context.Context, loc string, f index.File) (*stamps, error) {
	name := stampsName(loc, f)
	data, _, err := e.b.Get(ctx, name)
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec stamps
	if err := json.Unmarshal(data, &rec); err != nil || rec.Source != f.Path || rec.Digest != f.Digest {
		return nil, fmt.Errorf("%s: not the stamps record of %s: %w", name, f.Path, ErrCorrupt)
	}
	return &rec, nil
}

// stampsOf counts the rows of a fragment by (tick, token, epoch).
func stampsOf(data []byte) (*stamps, error) {
	counts := map[rowsStamp]int64{}
	_, _, total, _, _, err := filterParquet(data, func(tick int64, token string, epoch int64) bool {
		counts[rowsStamp{Tick: tick, Token: token, Epoch: epoch}]++
		return false
	})
	if err != nil {
		return nil, err
	}
	rec := &stamps{Rows: total}
	for s, n := range counts {
		s.Rows = n
		rec.Stamps = append(rec.Stamps, s)
	}
	slices.SortFunc(rec.Stamps, func(a, b rowsStamp) int {
		return cmp.Or(cmp.Compare(a.Tick, b.Tick), cmp.Compare(a.Token, b.Token), cmp.Compare(a.Epoch, b.Epoch))
	})
	return rec, nil
}
