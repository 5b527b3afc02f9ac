package faulty_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/faulty"
	"github.com/worldfs/worldfs/bucket/mem"
)

func TestScriptSkipsThenInjects(t *testing.T) {
	s := faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Prefix: "log/", Skip: 1, Times: 2, Fault: faulty.Fault{Kind: faulty.FailBefore}})
	var got []faulty.Kind
	for _, name := range []string{"log/1", "data/x", "log/2", "log/3", "log/4"} {
		got = append(got, s.Fault(faulty.OpCreate, name).Kind)
	}
	want := []faulty.Kind{faulty.None, faulty.None, faulty.FailBefore, faulty.FailBefore, faulty.None}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("faults = %v, want %v", got, want)
		}
	}
	if s.Fault(faulty.OpGet, "log/5").Kind != faulty.None {
		t.Fatal("a create rule fired on a get")
	}
}

func TestFailBeforeAndAfter(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	before := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Fault: faulty.Fault{Kind: faulty.FailBefore}}))
	if _, err := before.Create(ctx, "a", nil); !errors.Is(err, bucket.ErrAmbiguous) || !faulty.IsInjected(err) {
		t.Fatalf("fail-before = %v", err)
	}
	if _, err := inner.Stat(ctx, "a"); !errors.Is(err, bucket.ErrNotExist) {
		t.Fatalf("fail-before applied the create: %v", err)
	}
	after := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpCreate, Fault: faulty.Fault{Kind: faulty.FailAfter}}))
	if _, err := after.Create(ctx, "b", nil); !errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("fail-after = %v", err)
	}
	if _, err := inner.Stat(ctx, "b"); err != nil {
		t.Fatalf("fail-after did not apply the create: %v", err)
	}
	reads := faulty.Wrap(inner, faulty.NewScript(faulty.Rule{Op: faulty.OpGet, Fault: faulty.Fault{Kind: faulty.FailBefore}}))
	if _, _, err := reads.Get(ctx, "b"); !errors.Is(err, bucket.ErrUnavailable) || errors.Is(err, bucket.ErrAmbiguous) {
		t.Fatalf("injected read failure = %v, want ErrUnavailable", err)
	}
}

func TestStallHonoursContext(t *testing.T) {
	b := faulty.Wrap(mem.New(mem.Options{}), faulty.NewScript(faulty.Rule{Op: faulty.OpStat, Fault: faulty.Fault{Kind: faulty.Stall, Stall: time.Hour}}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.Stat(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled stat = %v after %v", err, time.Since(start))
	}
}

func TestRandomIsSeeded(t *testing.T) {
	kinds := []faulty.Kind{faulty.FailBefore, faulty.FailAfter}
	a := faulty.NewRandom(9, 0.3, kinds, 0)
	b := faulty.NewRandom(9, 0.3, kinds, 0)
	var hits int
	for range 1000 {
		x, y := a.Fault(faulty.OpCreate, "n"), b.Fault(faulty.OpCreate, "n")
		if x != y {
			t.Fatal("same seed, different faults")
		}
		if x.Kind != faulty.None {
			hits++
		}
	}
	if hits < 200 || hits > 400 {
		t.Fatalf("%d faults in 1000 calls at rate 0.3", hits)
	}
	if f := faulty.NewRandom(9, 1, kinds, 0, faulty.OpGet).Fault(faulty.OpCreate, "n"); f.Kind != faulty.None {
		t.Fatal("an op outside the injector's ops got a fault")
	}
}
