// Package gcs is the Google Cloud Storage bucket.
//
// Create uses the DoesNotExist precondition (ifGenerationMatch=0): a 412
// means the name is taken. Creates are never retried by the client, since a
// retried create whose first attempt landed would come back 412 and look
// lost; a 408, 429, 5xx, timeout or broken connection on a create is
// reported as bucket.ErrAmbiguous for the caller to resolve by reading back
// (bucket.CreateOnce). Idempotent calls (reads, stats, listings, deletes
// conditioned on a generation) are retried a bounded number of times with
// exponential backoff.
//
// Credentials come from the environment (Application Default Credentials);
// STORAGE_EMULATOR_HOST points the client at an emulator, as the client
// library defines.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"net"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/worldfs/worldfs/bucket"
)

// Options tune the backend.
type Options struct {
	// MaxAttempts bounds tries of one idempotent call (default 5).
	MaxAttempts int
	// Backoff is the retry backoff of idempotent calls (default 50 ms
	// doubling to 2 s).
	Backoff gax.Backoff
}

func (o *Options) withDefaults() {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff = gax.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}
	}
}

// Bucket is a GCS bucket, optionally confined to a name prefix.
type Bucket struct {
	client *storage.Client
	bkt    *storage.BucketHandle
	name   string
	prefix string // "" or ending in "/"
	owned  bool   // Close closes client
}

var _ bucket.Bucket = (*Bucket)(nil)

// Open connects to bucket name with credentials from the environment and
// keeps every object under prefix ("" for the whole bucket). Reads use the
// JSON API, which emulators serve too.
func Open(ctx context.Context, name, prefix string, opts Options) (*Bucket, error) {
	if p := strings.Trim(prefix, "/"); p != "" {
		if err := bucket.ValidateName(p); err != nil {
			return nil, fmt.Errorf("gcs: bucket prefix: %w", err)
		}
	}
	client, err := storage.NewClient(ctx, storage.WithJSONReads())
	if err != nil {
		return nil, fmt.Errorf("gcs: connecting to bucket %s: %w", name, err)
	}
	b, err := New(client, name, prefix, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	b.owned = true
	return b, nil
}

// New uses an existing client; Close leaves the client open.
func New(client *storage.Client, name, prefix string, opts Options) (*Bucket, error) {
	if name == "" {
		return nil, errors.New("gcs: empty bucket name")
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := bucket.ValidateName(prefix); err != nil {
			return nil, fmt.Errorf("gcs: bucket prefix: %w", err)
		}
		prefix += "/"
	}
	opts.withDefaults()
	client.SetRetry(
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithMaxAttempts(opts.MaxAttempts),
		storage.WithBackoff(opts.Backoff),
	)
	return &Bucket{client: client, bkt: client.Bucket(name), name: name, prefix: prefix}, nil
}

func (b *Bucket) String() string { return "gs://" + b.name + "/" + b.prefix }

func (b *Bucket) object(name string) *storage.ObjectHandle { return b.bkt.Object(b.prefix + name) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (b *Bucket) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return bucket.Attrs{}, err
	}
	obj := b.object(name).
		Retryer(storage.WithPolicy(storage.RetryNever)).
		If(storage.Conditions{DoesNotExist: true})
	w := obj.NewWriter(ctx)
	w.ChunkSize = 0 // one request: the object appears whole or not at all
	w.CRC32C = crc32.Checksum(data, castagnoli)
	w.SendCRC32C = true
	_, err := w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return bucket.Attrs{}, b.createErr(name, err)
	}
	return b.attrs(w.Attrs()), nil
}

// createErr classifies a failed create. Only answers that prove the create
// did not apply are definite; anything else may have landed.
func (b *Bucket) createErr(name string, err error) error {
	return b.mutationErr("create", name, err, bucket.ErrExist)
}

// mutationErr classifies a failed mutation: 412 is taken (precondition),
// a definite client error (400, 401, 403, 404) applied nothing, and every
// other failure (408, 429, 5xx, timeouts, broken connections, anything
// unrecognized) is ErrAmbiguous.
func (b *Bucket) mutationErr(op, name string, err error, precondition error) error {
	switch httpCode(err) {
	case http.StatusPreconditionFailed:
		return fmt.Errorf("gcs: %s %s: %w", op, name, precondition)
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return fmt.Errorf("gcs: %s %s: %w", op, name, err)
	}
	return fmt.Errorf("gcs: %s %s: %w: %w", op, name, bucket.ErrAmbiguous, err)
}

func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// readErr classifies a failed idempotent call (the client already retried).
func (b *Bucket) readErr(op, name string, err error) error {
	code := httpCode(err)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist) || code == http.StatusNotFound:
		return fmt.Errorf("gcs: %s %s: %w", op, name, bucket.ErrNotExist)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 || isNetwork(err):
		return fmt.Errorf("gcs: %s %s: %w: %w", op, name, bucket.ErrUnavailable, err)
	}
	return fmt.Errorf("gcs: %s %s: %w", op, name, err)
}

func (b *Bucket) attrs(a *storage.ObjectAttrs) bucket.Attrs {
	return bucket.Attrs{Name: strings.TrimPrefix(a.Name, b.prefix), Size: a.Size, Generation: a.Generation, Created: a.Created}
}

func (b *Bucket) Get(ctx context.Context, name string) ([]byte, bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return nil, bucket.Attrs{}, err
	}
	r, err := b.object(name).NewReader(ctx)
	if err != nil {
		return nil, bucket.Attrs{}, b.readErr("get", name, err)
	}
	defer r.Close()
	data := make([]byte, r.Attrs.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, bucket.Attrs{}, b.readErr("get", name, err)
	}
	return data, bucket.Attrs{Name: name, Size: r.Attrs.Size, Generation: r.Attrs.Generation, Created: r.Attrs.LastModified}, nil
}

func (b *Bucket) GetRange(ctx context.Context, name string, offset, length int64) ([]byte, error) {
	if err := bucket.ValidateName(name); err != nil {
		return nil, err
	}
	if offset < 0 {
		_, _, err := bucket.ClampRange(name, 0, offset, length)
		return nil, err
	}
	if length == 0 {
		// GCS has no empty range; answer from the object's size.
		a, err := b.Stat(ctx, name)
		if err != nil {
			return nil, err
		}
		_, _, err = bucket.ClampRange(name, a.Size, offset, 0)
		return []byte{}, err
	}
	r, err := b.object(name).NewRangeReader(ctx, offset, length)
	if httpCode(err) == http.StatusRequestedRangeNotSatisfiable {
		// Past the end, or exactly at it: the contract tells them apart.
		a, serr := b.Stat(ctx, name)
		if serr != nil {
			return nil, serr
		}
		_, _, cerr := bucket.ClampRange(name, a.Size, offset, length)
		return []byte{}, cerr
	}
	if err != nil {
		return nil, b.readErr("get", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, b.readErr("get", name, err)
	}
	return data, nil
}

func (b *Bucket) Stat(ctx context.Context, name string) (bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return bucket.Attrs{}, err
	}
	a, err := b.object(name).Attrs(ctx)
	if err != nil {
		return bucket.Attrs{}, b.readErr("stat", name, err)
	}
	return b.attrs(a), nil
}

func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	return func(yield func(bucket.Attrs, error) bool) {
		if err := bucket.ValidatePrefix(prefix); err != nil {
			yield(bucket.Attrs{}, err)
			return
		}
		q := &storage.Query{Prefix: b.prefix + prefix}
		if startAfter != "" {
			q.StartOffset = b.prefix + startAfter // inclusive; the name itself is skipped below
		}
		if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Created"}); err != nil {
			yield(bucket.Attrs{}, err)
			return
		}
		it := b.bkt.Objects(ctx, q) // fetches pages of up to 1000 as consumed
		for {
			a, err := it.Next()
			if err == iterator.Done {
				return
			}
			if err != nil {
				yield(bucket.Attrs{}, b.readErr("list", prefix, err))
				return
			}
			attrs := b.attrs(a)
			if attrs.Name <= startAfter {
				continue
			}
			if !yield(attrs, nil) {
				return
			}
		}
	}
}

// Delete deletes the exact generation, conditioned on it being live. GCS
// answers a moved generation with 412 (precondition) or 404 (that
// generation is gone); a Stat tells the latter from a missing name.
func (b *Bucket) Delete(ctx context.Context, name string, generation int64) error {
	if err := bucket.ValidateName(name); err != nil {
		return err
	}
	// No client retries: a retry of a delete that landed would answer 404
	// and hide the outcome. bucket.DeleteOnce retries with that in mind.
	err := b.object(name).Generation(generation).
		Retryer(storage.WithPolicy(storage.RetryNever)).
		If(storage.Conditions{GenerationMatch: generation}).Delete(ctx)
	if err == nil {
		return nil
	}
	mismatch := fmt.Errorf("gcs: delete %s at generation %d: %w", name, generation, bucket.ErrGenerationMismatch)
	if !errors.Is(err, storage.ErrObjectNotExist) && httpCode(err) != http.StatusNotFound {
		return b.mutationErr("delete", name, err, bucket.ErrGenerationMismatch)
	}
	// 404: that generation is gone. A Stat tells a moved generation from a
	// missing name; if it cannot answer, the outcome is unknown.
	a, serr := b.Stat(ctx, name)
	switch {
	case serr == nil && a.Generation != generation:
		return mismatch
	case errors.Is(serr, bucket.ErrNotExist):
		return fmt.Errorf("gcs: delete %s: %w", name, bucket.ErrNotExist)
	case serr != nil:
		return fmt.Errorf("gcs: delete %s: %w: %w", name, bucket.ErrAmbiguous, serr)
	}
	return fmt.Errorf("gcs: delete %s: %w: 404 for the live generation", name, bucket.ErrAmbiguous)
}

func (b *Bucket) Close() error {
	if b.owned {
		return b.client.Close()
	}
	return nil
}
