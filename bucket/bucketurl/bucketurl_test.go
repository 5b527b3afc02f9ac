package bucketurl_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/bucket/gcs"
	"github.com/worldfs/worldfs/bucket/gcs/gcstest"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/bucket/mem"
)

func TestOpenPicksBackend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{dir, "file://" + dir, filepath.Join(dir, "rel", "..", "x")} {
		b, err := bucketurl.Open(ctx, u)
		if _, ok := b.(*local.Bucket); err != nil || !ok {
			t.Errorf("Open(%q) = %T, %v; want local", u, b, err)
		}
	}
	b, err := bucketurl.Open(ctx, "mem://x?profile=gcs&seed=3")
	if m, ok := b.(*mem.Bucket); err != nil || !ok || m.Profile().Name != "gcs" {
		t.Errorf("Open(mem://x?profile=gcs) = %T, %v", b, err)
	}
	gcstest.Start(t, "bkt")
	b, err = bucketurl.Open(ctx, "gs://bkt/some/prefix")
	if g, ok := b.(*gcs.Bucket); err != nil || !ok || g.String() != "gs://bkt/some/prefix/" {
		t.Errorf("Open(gs://bkt/some/prefix) = %v, %v", b, err)
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	for u, want := range map[string]string{
		"":                    "empty bucket URL",
		"s3://b":              `unknown scheme "s3"`,
		"gs://":               "no bucket name",
		"mem://":              "no name",
		"mem://x?profile=aws": `unknown profile "aws"`,
		"mem://x?seed=abc":    `seed "abc"`,
		"mem://x?latency=1":   `unknown parameter "latency"`,
		"file://host/path":    "local path",
		"gs://b/a/../etc":     "invalid object name",
	} {
		_, err := bucketurl.Open(context.Background(), u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", u, err, want)
		}
	}
}
