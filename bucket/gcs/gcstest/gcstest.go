// Package gcstest runs an in-process fake GCS server
// (github.com/fsouza/fake-gcs-server) on loopback for tests, so the real
// GCS client is exercised over real HTTP.
package gcstest

import (
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Server is a running fake GCS server.
type Server struct {
	*fakestorage.Server
}

// Start starts a fake GCS server with the named buckets, sets
// STORAGE_EMULATOR_HOST to it for the test (so gs:// URLs reach it), and
// stops it when the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		t.Fatalf("starting fake GCS server: %v", err)
	}
	t.Cleanup(srv.Stop)
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	return &Server{srv}
}
