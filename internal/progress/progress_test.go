package progress

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// Long work draws its progress on a terminal only: written to a pipe, the
// helper every long command uses writes nothing at all.
func TestProgressQuietInAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := New(w)
	p.Step("catalog: slots folded", 3, -1)
	p.Step("fragments checked", 1, 2)
	p.Clear()
	p.Step("fragments checked", 2, 2)
	p.Done()
	w.Close()
	got, _ := io.ReadAll(r)
	if len(got) != 0 {
		t.Fatalf("progress wrote %q to a pipe; want nothing", got)
	}
}

// On a terminal the bar is drawn, and done clears it so nothing is drawn
// after.
func TestProgressDrawsOnATerminal(t *testing.T) {
	var out bytes.Buffer
	p := &Line{w: &out}
	p.Step("fragments checked", 1, 4)
	if !strings.Contains(out.String(), "fragments checked") || !strings.Contains(out.String(), "1/4") {
		t.Fatalf("drawn %q; want the description and 1/4", out.String())
	}
	p.Done()
	n := out.Len()
	p.Step("fragments checked", 2, 4)
	if out.Len() != n {
		t.Fatalf("drawn after done: %q", out.String()[n:])
	}
}
