package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
)

// A GCS server that answers every upload with 503 (the other calls reach
// a fake GCS server): each create is ambiguous, CreateOnce reads the name
// back, finds nothing, tries again and gives up, with the outcome still
// unknown. The command exits 3 and says the write is in doubt and what
// to look at, as it does for a bucket that stopped answering.
func TestCreateGivenUpOn5xxIsInDoubt(t *testing.T) {
	srv := gcstest.Start(t, "b")
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = srv.HTTPClient().Transport
	var uploads atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/upload/") {
			uploads.Add(1)
			http.Error(w, `{"error":{"code":503,"message":"backend error"}}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", front.URL)

	src := filepath.Join(t.TempDir(), "note")
	if err := os.WriteFile(src, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliWithin(t, "bucket", "put", "--bucket", "gs://b/p", "notes/a", src)
	if uploads.Load() < 2 {
		t.Fatalf("%d uploads reached the server: the create was not retried after its ambiguous outcome (stderr %q)", uploads.Load(), stderr)
	}
	if code != 3 || !strings.Contains(stderr, "outcome unknown") || !strings.Contains(stderr, "a write of this command is in doubt") ||
		!strings.Contains(stderr, "worldfs log --world") || !strings.Contains(stderr, "worldfs check --world") {
		t.Errorf("exit %d, stderr %q; want exit 3, the ambiguous create, and a line saying the write is in doubt and to look with worldfs log and check", code, stderr)
	}
}
