// Package gcstest runs an in-process fake GCS server
// (github.com/fsouza/fake-gcs-server) on loopback for tests, so the real
// GCS client is exercised over real HTTP.
package gcstest

import (
	"net"
	"sync"
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

// Unresponsive starts a TCP listener on loopback that accepts connections
// and never answers (a server stopped with SIGSTOP looks the same to a
// client), sets STORAGE_EMULATOR_HOST to it for the test, and closes it and
// its connections when the test ends. It returns its address.
func Unresponsive(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	t.Setenv("STORAGE_EMULATOR_HOST", "http://"+l.Addr().String())
	return l.Addr().String()
}
