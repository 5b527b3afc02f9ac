package cache

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
)

// Checked is what checking one object against its record found.
type Checked struct {
	// Copied: the object's generation is not the one the catalog recorded
	// (the bucket was copied, or the object written again), and its bytes
	// are the recorded ones: re-verified, not damaged.
	Copied bool
	// Read is how many bytes were read to decide (0: decided from the
	// object's attributes, or remembered).
	Read int64
	// Data is the object's bytes, found whole, when they were read from
	// a remote bucket (nil otherwise): a caller that reads the object
	// further (check's tick index summaries) reads these, not the object
	// a second time.
	Data []byte
}

// Check checks r's object in b (bucketID names b as the cache does) by the
// rule of checkStat: presence and size always; the generation as the fast
// path; the sha256 of the bytes when the generation differs (unless this
// very file or object was found whole before) or when readData. A copy
// found whole is remembered, so the next check, query or mount does not
// hash it again. A mismatch is a CorruptFragmentError.
func (v *Verified) Check(ctx context.Context, b bucket.Bucket, bucketID string, r Record, readData bool) (Checked, error) {
	if lb, ok := bucket.As[bucket.Local](b); ok {
		p, err := lb.Path(r.Name)
		if err != nil {
			return Checked{}, err
		}
		return v.checkFile(ctx, p, r, readData)
	}
	attrs, err := b.Stat(ctx, r.Name)
	if errors.Is(err, bucket.ErrNotExist) {
		return Checked{}, missing(r, "")
	}
	if err != nil {
		return Checked{}, err
	}
	moved, err := r.CheckAttrs(attrs)
	if err != nil || (!moved && !readData) {
		return Checked{}, err
	}
	k := objectKey(bucketID, r, attrs)
	if !readData && v.hasKey(r, k) {
		return Checked{Copied: moved}, nil
	}
	data, now, err := b.Get(ctx, r.Name)
	if errors.Is(err, bucket.ErrNotExist) {
		return Checked{}, missing(r, "")
	}
	if err != nil {
		return Checked{}, err
	}
	now.Size = int64(len(data))
	if moved, err = r.CheckAttrs(now); err != nil {
		return Checked{Read: now.Size}, err
	}
	if err := r.CheckData("", data); err != nil {
		return Checked{Read: now.Size}, err
	}
	v.remember([]entryOf{{r, objectKey(bucketID, r, now)}})
	return Checked{Copied: moved, Read: now.Size, Data: data}, nil
}

// checkFile is Check of a local bucket's file p.
func (v *Verified) checkFile(ctx context.Context, p string, r Record, readData bool) (Checked, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return Checked{}, missing(r, "")
	}
	if err != nil {
		return Checked{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Checked{}, err
	}
	moved, err := r.checkStat("", info.Size(), local.Generation(info))
	if err != nil || (!moved && !readData) || r.Digest == "" {
		return Checked{}, err
	}
	if !readData && v.has(r, info) {
		return Checked{Copied: moved}, nil
	}
	if err := ctx.Err(); err != nil {
		return Checked{}, err
	}
	sum, err := HashFile(f)
	if err != nil {
		return Checked{}, fmt.Errorf("verifying fragment %s: %w", r.Name, err)
	}
	if err := r.CheckDigest("", sum); err != nil {
		return Checked{Read: info.Size()}, err
	}
	v.remember([]entryOf{{r, fileKey(r, info)}})
	return Checked{Copied: moved, Read: info.Size()}, nil
}
