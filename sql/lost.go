package sql

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/cache"
)

// LostFileError: a query needs rows of a file the catalog records that is
// missing from the bucket or differs from its record (the catalog itself
// is sound: a corrupt catalog fails the views closed, invariant 8). Only
// the queries that read the file fail: the other tables, and the other
// ticks of its table read through <table>_at(t), answer as before
// (docs/ARCHITECTURE.md, "A read through the views"). It wraps what is
// wrong with the file (a *cache.CorruptFragmentError: errors.Is
// cache.ErrCorruptFragment and bucket.ErrCorruption hold).
type LostFileError struct {
	World, Run string
	// Table is the table's name; Facts: the file holds facts (or
	// evaluation receipts) of the table, which landed at ticks From..To.
	Table string
	Facts bool
	// From and To bound the ticks whose rows the views read from the file:
	// its tick, or the ticks of a compacted file the views show.
	From, To int64
	Object   string // the bucket object
	Err      error
}

func (e *LostFileError) Error() string {
	ticks := fmt.Sprintf("ticks %d..%d are", e.From, e.To)
	if e.From == e.To {
		ticks = fmt.Sprintf("tick %d is", e.From)
	}
	if e.Facts {
		ticks = "the facts of " + ticks
		if e.From == e.To {
			ticks = fmt.Sprintf("the facts of tick %d are", e.From)
		}
	}
	var why string
	var cf *cache.CorruptFragmentError
	switch {
	case errors.As(e.Err, &cf) && cf.What == "presence":
		why = "which is missing from the bucket (the catalog records it)"
	case errors.As(e.Err, &cf):
		why = fmt.Sprintf("which does not match the catalog: its %s is %s, the catalog records %s", cf.What, cf.Got, cf.Want)
	default:
		why = fmt.Sprintf("which cannot be read: %v", e.Err)
	}
	return fmt.Sprintf("table %s of world %s, run %s: %s in %s, %s", e.Table, e.World, e.Run, ticks, e.Object, why)
}

func (e *LostFileError) Unwrap() error { return e.Err }

// lostFile returns err, what is wrong with the file at path, as a
// LostFileError with what the views read from the file, found in the
// fragment lists; err as it is if no list names the file.
func lostFile(lists []string, path string, err error) error {
	e := &LostFileError{From: math.MaxInt64, To: math.MinInt64, Err: err}
	for _, list := range lists {
		if rerr := eachListRow(list, func(r *listRow) {
			if r.Path != path {
				return
			}
			e.World, e.Run, e.Table, e.Object = r.World, r.Run, r.View, r.Object
			e.Facts = e.Facts || r.Fact
			first, last := r.FirstTick, r.LastTick
			if !r.Filtered {
				first, last = r.Tick, r.Tick
			}
			e.From, e.To = min(e.From, first), max(e.To, last)
		}); rerr != nil {
			return fmt.Errorf("%w (reading the views' fragment list to tell its table and ticks: %v)", err, rerr)
		}
	}
	if e.Object == "" {
		return err
	}
	return e
}

// eachListRow calls fn with each row of the fragment list at path.
func eachListRow(path string, fn func(*listRow)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		return err
	}
	r := parquet.NewGenericReader[listRow](pf)
	defer r.Close()
	rows := make([]listRow, 1024)
	for {
		n, err := r.Read(rows)
		for i := range rows[:n] {
			fn(&rows[i])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
