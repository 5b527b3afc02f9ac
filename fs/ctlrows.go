package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/worldfs/worldfs/engine"
)

// frameOf builds an archetype's whole frame from rows given inline or as a
// path to a Parquet or JSONL file, every row checked and converted exactly
// by engine.InputRow (JSON numbers are decoded as numbers, never through
// float64). A row's entity_id and every component column are required; its
// commit columns (tick, commit_token, writer_epoch), as in a snapshot
// file, are ignored: the new tick stamps its own.
func frameOf(ctx context.Context, t *engine.Table, raw json.RawMessage) (*engine.Frame, error) {
	var rows []map[string]any
	var path string
	if err := json.Unmarshal(raw, &path); err == nil {
		if !filepath.IsAbs(path) {
			return nil, badf("%s: %q: give an absolute path (the mount has no working directory of yours)", t.Name, path)
		}
		if rows, err = readRowsAsCaller(ctx, path); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	} else if err := engine.DecodeStrict(raw, &rows); err != nil {
		return nil, badf("%s: frames are an array of row objects or a file path: %v", t.Name, err)
	}
	f := engine.NewFrame(t)
	for i, row := range rows {
		e, v, err := engine.InputRow(t, row)
		if err == nil {
			err = f.Insert(e, v)
		}
		if err != nil {
			return nil, badf("%s row %d: %v", t.Name, i, err)
		}
	}
	return f, nil
}
