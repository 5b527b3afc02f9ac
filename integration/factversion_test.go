package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wfs "github.com/worldfs/worldfs/fs"
)

// A facts file changes as facts complete, and each open reads the one
// version it opened, whole: a reader that opened the file before a new
// fact completed reads the old version to its end, byte for byte, even
// after another reader opened and read the new one (the kernel caches
// pages per inode, so two versions under one inode would mix).
func TestAnOpenFactsFileKeepsItsVersion(t *testing.T) {
	b, _ := checkpointedWorld(t)
	writer := testMount(t, b)
	ingest(t, writer, "w", "a")
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	for _, name := range []string{"reading.parquet", "reading.csv"} {
		path := mt.path("w", "facts", "main", name)
		old, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		before, _, err := readWhole(old)
		if err != nil {
			t.Fatal(err)
		}
		ingest(t, writer, "w", "x-"+name)
		newer, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(newer, before) {
			t.Fatalf("%s: the same %d bytes after a new fact completed", name, len(before))
		}
		again, _, err := readWhole(old)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, before) {
			t.Errorf("%s: the file opened before the new fact reads %d bytes (%q…), not its %d (%q…)", name, len(again), prefix(again), len(before), prefix(before))
		}
		st, err := old.Stat()
		if err != nil || st.Size() != int64(len(before)) {
			t.Errorf("%s: the file opened before the new fact has size %v (%v), not %d", name, st.Size(), err, len(before))
		}
	}
}

// readWhole reads f from its start to its end and returns its bytes and
// its size as fstat gives it.
func readWhole(f *os.File) ([]byte, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, st.Size()+4096) // room for bytes past the size, if any
	n, err := f.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:n], st.Size(), err
}

func prefix(b []byte) []byte { return b[:min(len(b), 16)] }

// Readers that open and read a facts file whole while new facts complete
// each read one version whole: as many bytes as its size at open, PAR1 at
// both ends. (Under one inode for every version the kernel mixed their
// pages: a reader got the next version's bytes under the size of its
// own, in a few reads.)
func TestFactsFileReadersWhileFactsComplete(t *testing.T) {
	b, _ := checkpointedWorld(t)
	writer := testMount(t, b)
	ingest(t, writer, "w", "a")
	mt := testMountWith(t, b, wfs.Options{Freshness: time.Nanosecond}, wfs.MountOptions{})
	path := mt.path("w", "facts", "main", "reading.parquet")
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 2)
	read := func() error {
		for {
			select {
			case <-done:
				return nil
			default:
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			data, size, err := readWhole(f)
			f.Close()
			if err != nil {
				return err
			}
			reads.Add(1)
			if int64(len(data)) != size || len(data) < 8 || string(data[:4]) != "PAR1" || string(data[len(data)-4:]) != "PAR1" {
				return fmt.Errorf("a torn read: %d bytes of a file of %d, %q … %q", len(data), size, prefix(data), data[max(0, len(data)-8):])
			}
		}
	}
	for range 2 {
		wg.Go(func() { errs <- read() })
	}
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	defer stop() // the readers stop before the mounts go, whatever ends the test
	for deadline, i := time.Now().Add(5*time.Second), 0; time.Now().Before(deadline); i++ {
		ingest(t, writer, "w", fmt.Sprintf("n%d", i))
	}
	stop()
	if err := errors.Join(<-errs, <-errs); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads", reads.Load())
}
