package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// Errors map to exit statuses and messages in one place: every
// corruption (the one marker, bucket.ErrCorruption) exits 1 and names
// worldfs check; every ambiguous outcome exits 3 and says a write is in
// doubt.
func TestCorruptionAndDoubtMapOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		code int
		line string
	}{
		{"a damaged slot", fmt.Errorf("world w: slot 3: %w", index.ErrCorrupt), exitFailed, "worldfs check --world W --read-data"},
		{"a flipped fragment", fmt.Errorf("read: %w", &cache.CorruptFragmentError{Name: "f", What: "sha256", Got: "a", Want: "b"}), exitFailed, "worldfs check --world W --read-data"},
		{"an asset that does not hash to its digest", fmt.Errorf("asset: %w", engine.ErrAssetMismatch), exitFailed, "worldfs check --world W --read-data"},
		{"a create given up on", fmt.Errorf("create x: %w: gave up", bucket.ErrAmbiguous), exitInDoubt, "a write of this command is in doubt"},
		{"a frozen world", fmt.Errorf("tick 4: %w", engine.ErrFrozen), exitInDoubt, "'worldfs log --world W'"},
		{"anything else", fmt.Errorf("boom"), exitFailed, ""},
	} {
		code := exitCode(context.Background(), c.err)
		var stderr bytes.Buffer
		report(&stderr, c.err, code)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != c.code || !strings.HasPrefix(stderr.String(), "worldfs: "+c.err.Error()+"\n") ||
			c.line != "" && (len(lines) != 2 || !strings.Contains(lines[1], c.line)) || c.line == "" && len(lines) != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and the error, then a line with %q", c.name, code, stderr.String(), c.code, c.line)
		}
	}
}
