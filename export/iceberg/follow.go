package iceberg

import (
	"context"
	"errors"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// Follow exports the head now, then again after the world's change feed
// delivers a change (a publish, a compaction, a claim, a receipt; not an
// intent, which changes no row), at most once per every, until ctx ends;
// fn hears of each export. The export trails the head by at most every
// plus the time of one export. Every export goes through one catalog of
// the world (opts.Catalog, or one Follow opens).
func Follow(ctx context.Context, b bucket.Bucket, opts Options, every time.Duration, fn func(*Result)) error {
	if opts.AtTick != nil || opts.Token != "" {
		return errors.New("export: following keeps the export at the head; it takes no pin")
	}
	if every <= 0 {
		return errors.New("export: following needs a positive interval")
	}
	opts, err := ready(b, opts)
	if err != nil {
		return err
	}
	if opts.Catalog == nil {
		cat, err := index.Open(ctx, b, opts.World, index.Options{NoCompactor: true})
		if err != nil {
			return err
		}
		defer cat.Close()
		opts.Catalog = cat
	}
	res, err := Export(ctx, b, opts)
	if err != nil {
		return err
	}
	fn(res)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	failed := make(chan error, 1)
	go func() {
		for c, err := range index.Changes(ctx, b, opts.World, res.Seq+1, min(every, time.Second)) {
			if err != nil {
				failed <- err
				return
			}
			if k := c.Entry.Kind; k == index.KindIntentOpen || k == index.KindIntentClose {
				continue // an export's own, or a compaction's: no row changed
			}
			select {
			case changed <- struct{}{}:
			default: // an export is already due
			}
		}
	}()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-changed:
		}
		if wait := every - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		last = time.Now()
		res, err := Export(ctx, b, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		fn(res)
	}
}
