package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/buckettest"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
	"github.com/worldfs/worldfs/cache"
)

func TestValidateName(t *testing.T) {
	for _, good := range []string{
		"a", "worlds/w1/marker.json", "worlds/w1/log/0000000000000002", "data/w/r/t/tok/0.parquet",
		"x/.hidden", "a/.worldfs", "ünïcode/名前", strings.Repeat("s", bucket.MaxSegmentLen),
	} {
		if err := bucket.ValidateName(good); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", good, err)
		}
	}
	for _, bad := range buckettest.BadNames {
		err := bucket.ValidateName(bad)
		var ne *bucket.NameError
		if !errors.Is(err, bucket.ErrInvalidName) || !errors.As(err, &ne) || ne.Reason == "" {
			t.Errorf("ValidateName(%.40q) = %v, want a NameError with a reason", bad, err)
		}
	}
	// The message names the problem.
	if err := bucket.ValidateName("a/../b"); err == nil || !strings.Contains(err.Error(), `segment ".."`) {
		t.Errorf("ValidateName(a/../b) = %v, want it to name the .. segment", err)
	}
	for _, good := range []string{"", "worlds/", "worlds/w1/log/00000", "p"} {
		if err := bucket.ValidatePrefix(good); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v", good, err)
		}
	}
}

func TestCreateOnceGivesUpAfterMaxAttempts(t *testing.T) {
	script := faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Fault: faulty.Fault{Kind: faulty.FailBefore}})
	b := faulty.Wrap(mem.New(mem.Options{}), script)
	_, err := bucket.CreateOnce(context.Background(), b, "x", []byte("x"))
	if !errors.Is(err, bucket.ErrAmbiguous) || script.Injected != bucket.MaxAttempts {
		t.Fatalf("CreateOnce = %v after %d creates; want ErrAmbiguous after %d", err, script.Injected, bucket.MaxAttempts)
	}
}

func TestDeleteOnce(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	a, _ := inner.Create(ctx, "x", []byte("x"))
	// The delete lands but its response is lost: the retry finds the name
	// gone, which is this call's doing.
	b := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpDelete, Times: 1, Fault: faulty.Fault{Kind: faulty.FailAfter}}))
	if err := bucket.DeleteOnce(ctx, b, "x", a.Generation); err != nil {
		t.Fatalf("DeleteOnce after a lost response = %v", err)
	}
	// A name that was never there is still ErrNotExist.
	if err := bucket.DeleteOnce(ctx, b, "never", 1); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("DeleteOnce of a missing name = %v, want ErrNotExist", err)
	}
	// A moved generation is refused, not retried.
	a, _ = inner.Create(ctx, "y", []byte("y"))
	if err := bucket.DeleteOnce(ctx, b, "y", a.Generation+1); !errors.Is(err, bucket.ErrGenerationMismatch) {
		t.Fatalf("DeleteOnce at a moved generation = %v", err)
	}
}

// recreating deletes for real, then creates the name again (another
// writer) and answers as if the response were lost.
type recreating struct{ bucket.Bucket }

func (r recreating) Delete(ctx context.Context, name string, gen int64) error {
	if err := r.Bucket.Delete(ctx, name, gen); err != nil {
		return err
	}
	r.Bucket.Create(ctx, name, []byte("newer"))
	return fmt.Errorf("lost response: %w", bucket.ErrAmbiguous)
}

// A delete whose outcome was unknown, after which the name was created
// again, removed the generation it read: DeleteOnce reports success, not
// a mismatch (which would claim nothing was removed).
func TestDeleteOnceAfterRecreate(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	a, _ := inner.Create(ctx, "x", []byte("1"))
	if err := bucket.DeleteOnce(ctx, recreating{inner}, "x", a.Generation); err != nil {
		t.Fatalf("DeleteOnce = %v, want success", err)
	}
}

// unreadable: every create is ambiguous and every read fails for good.
type unreadable struct{ bucket.Bucket }

func (unreadable) Create(context.Context, string, []byte) (bucket.Attrs, error) {
	return bucket.Attrs{}, bucket.ErrAmbiguous
}

func (unreadable) Get(context.Context, string) ([]byte, bucket.Attrs, error) {
	return nil, bucket.Attrs{}, errors.New("permission denied")
}

// readBack gives up on a permanent read failure instead of looping.
func TestCreateOnceStopsOnPermanentReadFailure(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := bucket.CreateOnce(context.Background(), unreadable{mem.New(mem.Options{})}, "x", nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, bucket.ErrAmbiguous) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("CreateOnce = %v, want ErrAmbiguous naming the read failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CreateOnce kept retrying a permanent read failure")
	}
}

// As finds a capability through any stack of wrappers, and only where the
// bucket underneath has it.
func TestAsSeesThroughWrappers(t *testing.T) {
	lb, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mc, err := cache.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	wrapped := faulty.Wrap(&buckettest.Counting{Bucket: mc.Wrap(lb)}, faulty.NewScript())
	got, ok := bucket.As[bucket.Local](wrapped)
	if !ok || got.Root() != lb.Root() {
		t.Fatalf("As[Local] of a wrapped local bucket = %v, %v", got, ok)
	}
	if _, ok := bucket.As[bucket.Local](faulty.Wrap(mem.New(mem.Options{}), faulty.NewScript())); ok {
		t.Fatal("As[Local] found a local bucket under a memory bucket")
	}
	if _, ok := bucket.As[bucket.Local](struct{ bucket.Bucket }{lb}); ok {
		t.Fatal("As[Local] saw through a wrapper that does not unwrap")
	}
}
