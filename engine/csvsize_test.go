package engine_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// A writer records each fragment's CSV size in its footer, the size
// WriteCSV renders; with Options.NoCSVSizes none, and a reader of the
// footer is told so (and renders the CSV itself).
func TestWriterRecordsCSVSizes(t *testing.T) {
	ctx := context.Background()
	for _, skip := range []bool{false, true} {
		b := mem.New(mem.Options{})
		opts := enginetest.Quiet
		opts.NoCSVSizes = skip
		enginetest.World(t, b, "w", 3, opts).Close()
		s, _, err := index.Load(ctx, b, "w")
		if err != nil {
			t.Fatal(err)
		}
		tk, _ := s.Tick(index.DefaultRun, 3)
		for _, tf := range enginetest.Tables(t, tk) {
			f := tf.Fragments[0]
			size, ok, err := frame.ReadCSVSize(ctx, b, f)
			if err != nil {
				t.Fatal(err)
			}
			data, _, err := b.Get(ctx, f.Path)
			if err != nil {
				t.Fatal(err)
			}
			var csv bytes.Buffer
			if err := frame.WriteCSV(&csv, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			empty := f.Rows == 0
			switch {
			case (!skip || empty) && (!ok || size != int64(csv.Len())):
				t.Fatalf("NoCSVSizes %v: %s records a CSV size of %d (%v), WriteCSV writes %d", skip, f.Path, size, ok, csv.Len())
			case skip && !empty && ok:
				t.Fatalf("with NoCSVSizes: %s still records a CSV size (%d)", f.Path, size)
			}
		}
	}
}
