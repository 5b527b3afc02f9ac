// Package gcs is the Google Cloud Storage bucket.
//
// Create uses the DoesNotExist precondition (ifGenerationMatch=0): a 412
// means the name is taken. Creates are never retried by the client, since a
// retried create whose first attempt landed would come back 412 and look
// lost; a 408, 429, 5xx, timeout or broken connection on a create is
// reported as bucket.ErrAmbiguous for the caller to resolve by reading back
// (bucket.CreateOnce). Idempotent calls (reads, stats, listing pages) are
// retried a bounded number of times with exponential backoff. Deletes,
// conditioned on a generation, are not retried either: bucket.DeleteOnce
// resolves them.
//
// Every attempt has a deadline measured in silence (Options.Timeout): an
// attempt the server sends nothing to for its limit is cancelled, so a server
// that accepts connections and never answers costs a bounded wait and a
// *bucket.NotAnsweringError (bucket.ErrAmbiguous for a create or delete,
// bucket.ErrUnavailable otherwise), never a hang. The backend runs its own
// retries, attempt by attempt, and leaves the client's retry policy alone:
// a client passed to New is the caller's.
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
	"github.com/worldfs/worldfs/bucket/internal/watchdog"
)

// Options tune the backend.
type Options struct {
	// Timeout is how long one call waits on a server that sends nothing
	// (default bucket.DefaultTimeout). A create or delete is sent once and
	// given up after Timeout without a reply; a read, stat or listing page
	// is tried up to NoReplyTries times, each try given up after
	// Timeout/NoReplyTries without a reply. Bytes arriving, or taken by the
	// server during an upload, count as a reply, so a slow transfer that
	// keeps moving is never cut.
	Timeout time.Duration
	// MaxAttempts bounds tries of one idempotent call (default 5).
	MaxAttempts int
	// Backoff is the retry backoff of idempotent calls (default 50 ms
	// doubling to 2 s).
	Backoff gax.Backoff
}

// NoReplyTries is how many tries of an idempotent call may go unanswered.
const NoReplyTries = 3

// EnsureDefaults fills in what is unset with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Timeout <= 0 {
		o.Timeout = bucket.DefaultTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff = gax.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}
	}
	return o
}

// Validate checks the options once their defaults are in (New calls
// EnsureDefaults, then Validate): every one of the NoReplyTries silent
// tries gets at least a millisecond, and the backoff does not shrink.
func (o *Options) Validate() error {
	if o.Timeout < NoReplyTries*time.Millisecond {
		return fmt.Errorf("gcs options: timeout %v leaves its %d tries under a millisecond each", o.Timeout, NoReplyTries)
	}
	if o.Backoff.Multiplier != 0 && o.Backoff.Multiplier < 1 {
		return fmt.Errorf("gcs options: backoff multiplier %v shrinks the pauses", o.Backoff.Multiplier)
	}
	return nil
}

// Bucket is a GCS bucket, optionally confined to a name prefix.
type Bucket struct {
	client *storage.Client
	bkt    *storage.BucketHandle
	name   string
	prefix string // "" or ending in "/"
	owned  bool   // Close closes client
	opts   Options
}

var (
	_ bucket.Bucket      = (*Bucket)(nil)
	_ bucket.Addressable = (*Bucket)(nil)
)

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

// New uses an existing client; Close leaves the client open, and its retry
// policy is left as it is (the backend's handles retry nothing themselves).
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
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	// Every attempt is this backend's own, under its own deadline: a
	// retry inside the client would share one deadline across attempts.
	bkt := client.Bucket(name).Retryer(storage.WithPolicy(storage.RetryNever))
	return &Bucket{client: client, bkt: bkt, name: name, prefix: prefix, opts: opts}, nil
}

func (b *Bucket) String() string { return "gs://" + b.name + "/" + b.prefix }

// URI is the bucket's root as other programs address it:
// gs://<bucket>/<prefix>/ (bucket.Addressable).
func (b *Bucket) URI() string { return b.String() }

// noReply is the error of a call the server sent nothing to for after.
func (b *Bucket) noReply(op, name string, after time.Duration) error {
	return &bucket.NotAnsweringError{Bucket: b.String(), Op: op, Name: name, After: after}
}

// readLimit is the silence one try of an idempotent call waits out.
func (b *Bucket) readLimit() time.Duration { return b.opts.Timeout / NoReplyTries }

// waited is how long silent unanswered tries waited in all.
func (b *Bucket) waited(silent int) time.Duration {
	if silent == NoReplyTries {
		return b.opts.Timeout
	}
	return time.Duration(silent) * b.readLimit()
}

// idempotent runs call, an idempotent request, try after try: each try under
// a watchdog of readLimit, up to MaxAttempts tries (NoReplyTries of them
// unanswered) while the failures are transient, with backoff between. It
// returns nil, the classified error of the last try, or a
// *bucket.NotAnsweringError.
func (b *Bucket) idempotent(ctx context.Context, op, name string, call func(ctx context.Context, dog *watchdog.Dog) error) error {
	bo := b.opts.Backoff // gax.Backoff keeps its state: a copy per call
	silent := 0
	for attempt := 1; ; attempt++ {
		actx, dog := watchdog.Start(ctx, b.readLimit())
		err := call(actx, dog)
		fired := dog.Stop()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil: // the caller's context, not a deadline of ours
			return b.readErr(op, name, err)
		case fired:
			silent++
			err = b.noReply(op, name, b.waited(silent))
			if silent == NoReplyTries || attempt >= b.opts.MaxAttempts {
				return err
			}
		default:
			err = b.readErr(op, name, err)
			if !errors.Is(err, bucket.ErrUnavailable) || attempt >= b.opts.MaxAttempts {
				return err
			}
		}
		if bucket.Sleep(ctx, bo.Pause()) != nil {
			return err
		}
	}
}

// kicker reports every read that brings bytes as progress.
type kicker struct {
	r   io.Reader
	dog *watchdog.Dog
}

func (k kicker) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if n > 0 {
		k.dog.Kick()
	}
	return n, err
}

// uploadPiece is how much of an object's bytes one Write hands the upload:
// each piece the server takes is progress.
const uploadPiece = 256 << 10

func (b *Bucket) object(name string) *storage.ObjectHandle { return b.bkt.Object(b.prefix + name) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (b *Bucket) Create(ctx context.Context, name string, data []byte) (bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return bucket.Attrs{}, err
	}
	obj := b.object(name).If(storage.Conditions{DoesNotExist: true})
	// One try, under a watchdog of the whole Timeout: the server taking
	// the bytes and then answering is the progress it waits for.
	actx, dog := watchdog.Start(ctx, b.opts.Timeout)
	w := obj.NewWriter(actx)
	w.ChunkSize = 0 // one request: the object appears whole or not at all
	w.CRC32C = crc32.Checksum(data, castagnoli)
	w.SendCRC32C = true
	var err error
	for rest := data; err == nil && len(rest) > 0; {
		n := min(len(rest), uploadPiece)
		_, err = w.Write(rest[:n])
		rest = rest[n:]
		dog.Kick()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	fired := dog.Stop()
	switch {
	case err == nil:
		return b.attrs(w.Attrs()), nil
	case fired && ctx.Err() == nil:
		return bucket.Attrs{}, b.noReply("create", name, b.opts.Timeout)
	}
	return bucket.Attrs{}, b.createErr(name, err)
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
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("gcs: %s %s: %w", op, name, bucket.ErrNoBucket)
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
	var data []byte
	var attrs bucket.Attrs
	err := b.idempotent(ctx, "get", name, func(ctx context.Context, dog *watchdog.Dog) error {
		r, err := b.object(name).NewReader(ctx)
		if err != nil {
			return err
		}
		defer r.Close()
		dog.Kick()
		data = make([]byte, r.Attrs.Size)
		if _, err := io.ReadFull(kicker{r, dog}, data); err != nil {
			return err
		}
		attrs = bucket.Attrs{Name: name, Size: r.Attrs.Size, Generation: r.Attrs.Generation, Created: r.Attrs.LastModified}
		return nil
	})
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	return data, attrs, nil
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
	var data []byte
	err := b.idempotent(ctx, "get", name, func(ctx context.Context, dog *watchdog.Dog) error {
		r, err := b.object(name).NewRangeReader(ctx, offset, length)
		if err != nil {
			return err
		}
		defer r.Close()
		dog.Kick()
		data, err = io.ReadAll(kicker{r, dog})
		return err
	})
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
		return nil, err
	}
	return data, nil
}

func (b *Bucket) Stat(ctx context.Context, name string) (bucket.Attrs, error) {
	if err := bucket.ValidateName(name); err != nil {
		return bucket.Attrs{}, err
	}
	var a *storage.ObjectAttrs
	err := b.idempotent(ctx, "stat", name, func(ctx context.Context, _ *watchdog.Dog) (err error) {
		a, err = b.object(name).Attrs(ctx)
		return err
	})
	if err != nil {
		return bucket.Attrs{}, err
	}
	return b.attrs(a), nil
}

// List fetches pages as the caller consumes them. A page that fails is
// fetched again from after the last name yielded, under the same retry
// policy as other idempotent calls; every name that arrives resets the
// count of tries. The watchdog sleeps while the caller holds the turn.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[bucket.Attrs, error] {
	return func(yield func(bucket.Attrs, error) bool) {
		if err := bucket.ValidatePrefix(prefix); err != nil {
			yield(bucket.Attrs{}, err)
			return
		}
		after := startAfter // every name up to here is done
		bo := b.opts.Backoff
		attempt, silent := 0, 0
		for {
			attempt++
			q := &storage.Query{Prefix: b.prefix + prefix}
			if after != "" {
				q.StartOffset = b.prefix + after // inclusive; the name itself is skipped below
			}
			if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Created"}); err != nil {
				yield(bucket.Attrs{}, err)
				return
			}
			actx, dog := watchdog.Start(ctx, b.readLimit())
			it := b.bkt.Objects(actx, q) // fetches pages of up to 1000 as consumed
			var err error
			stopped := false
			for {
				dog.Kick()
				var a *storage.ObjectAttrs
				a, err = it.Next()
				dog.Pause()
				if err != nil {
					break
				}
				attempt, silent = 0, 0
				attrs := b.attrs(a)
				if attrs.Name <= after {
					continue
				}
				after = attrs.Name
				if !yield(attrs, nil) {
					stopped = true
					break
				}
			}
			fired := dog.Stop()
			switch {
			case stopped || err == iterator.Done:
				return
			case ctx.Err() != nil:
				yield(bucket.Attrs{}, b.readErr("list", prefix, err))
				return
			case fired:
				silent++
				err = b.noReply("list", prefix, b.waited(silent))
				if silent == NoReplyTries || attempt >= b.opts.MaxAttempts {
					yield(bucket.Attrs{}, err)
					return
				}
			default:
				err = b.readErr("list", prefix, err)
				if !errors.Is(err, bucket.ErrUnavailable) || attempt >= b.opts.MaxAttempts {
					yield(bucket.Attrs{}, err)
					return
				}
			}
			if bucket.Sleep(ctx, bo.Pause()) != nil {
				yield(bucket.Attrs{}, err)
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
	// One try: a retry of a delete that landed would answer 404 and hide
	// the outcome. bucket.DeleteOnce retries with that in mind.
	actx, dog := watchdog.Start(ctx, b.opts.Timeout)
	err := b.object(name).Generation(generation).
		If(storage.Conditions{GenerationMatch: generation}).Delete(actx)
	fired := dog.Stop()
	switch {
	case err == nil:
		return nil
	case fired && ctx.Err() == nil:
		return b.noReply("delete", name, b.opts.Timeout)
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
