package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
)

// referencedAssets returns the assets the evaluation receipts in the
// fragments receipts reference (their subjects' selectors), as objects of
// the content-addressed store, each recorded by its digest and size so
// that its bytes are checked as they are copied. An asset the store lacks
// is left out: the receipt binds it by digest, and it may live elsewhere
// (its uri).
func referencedAssets(ctx context.Context, b bucket.Bucket, receipts []cache.Record) ([]object, error) {
	seen := map[string]bool{}
	var out []object
	for _, r := range receipts {
		data, _, err := b.Get(ctx, r.Name)
		if err != nil {
			return nil, fmt.Errorf("receipt %s: %w", r.Name, err)
		}
		if err := r.CheckData("", data); err != nil {
			return nil, err
		}
		subjects, err := column(data, "receipt_subject")
		if err != nil {
			return nil, fmt.Errorf("receipt %s: %w", r.Name, err)
		}
		for _, text := range subjects {
			var sub engine.Subject
			if err := json.Unmarshal([]byte(text), &sub); err != nil {
				return nil, fmt.Errorf("receipt %s: its subject: %w", r.Name, err)
			}
			for _, a := range sub.Selector.Assets {
				name, err := engine.AssetPath(a.Digest)
				if err != nil || seen[name] {
					continue
				}
				seen[name] = true
				attrs, err := b.Stat(ctx, name)
				if errors.Is(err, bucket.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				out = append(out, object{name: name, size: attrs.Size, rec: cache.Record{Name: name, Digest: a.Digest}})
			}
		}
	}
	slices.SortFunc(out, func(a, b object) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// column returns the string values of the named top-level column of a
// Parquet file (nothing if it has no such column).
func column(data []byte, name string) ([]string, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	leaf, ok := f.Schema().Lookup(name)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, rg := range f.RowGroups() {
		pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				pages.Close()
				return nil, err
			}
			vals := make([]parquet.Value, p.NumValues())
			n, err := p.Values().ReadValues(vals)
			if err != nil && err != io.EOF {
				parquet.Release(p)
				pages.Close()
				return nil, err
			}
			for _, v := range vals[:n] {
				if !v.IsNull() {
					out = append(out, v.String())
				}
			}
			parquet.Release(p)
		}
		pages.Close()
	}
	return out, nil
}
