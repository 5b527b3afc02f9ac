package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	wsql "github.com/worldfs/worldfs/sql"
	"github.com/worldfs/worldfs/ui"
)

// uiCmd is "worldfs ui".
func uiCmd() command {
	var url, listen, cacheDir *string
	var cacheSize *int64
	var open *bool
	return command{
		name: "ui",
		summary: "serve a read-only web interface over the bucket's worlds: lineage, a run's timeline with a scrubber, a tick's rows and scatter plot, " +
			"two ticks or two worlds compared, sweeps of many worlds (a column's aggregate per tick for each, with their run parameters), SQL with charts, facts and receipts (the views and gate of worldfs sql); loopback only unless --listen, which then requires a token",
		example: "worldfs ui --bucket ./worldfs-data --open   # prints http://127.0.0.1:PORT/\n" +
			"  worldfs ui --bucket ./worldfs-data --listen 0.0.0.0:8080   # prints a URL with ?token=…; every request needs it",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			listen = fs.String("listen", "127.0.0.1:0", "address to serve on (port 0: any free port); an address that is not loopback requires the printed token")
			open = fs.Bool("open", false, "open the URL in a browser (xdg-open)")
			cacheDir = fs.String("cache-dir", defaultCacheDir(), "where copies of a remote bucket's fragments, and the views' fragment lists, are kept")
			cacheSize = sizeFlag(fs, "cache-size", cache.DefaultMaxBytes, "how much the fragment cache may hold")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("ui takes no arguments")
			}
			if _, _, err := net.SplitHostPort(*listen); err != nil {
				return usagef("--listen %q: want HOST:PORT, e.g. 127.0.0.1:8080 (port 0: any free port)", *listen)
			}
			b, err := openExisting(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			opts, done, err := uiOptions(b, *url, *cacheDir, *cacheSize)
			if err != nil {
				return err
			}
			defer done()
			if !ui.IsLoopback(*listen) {
				opts.Token = newToken()
			}
			srv, err := ui.New(opts)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", *listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", *listen, err)
			}
			links := serveURLs(ln.Addr().(*net.TCPAddr), opts.Token)
			link := links[0]
			if opts.Token != "" {
				fmt.Fprintf(out, "worldfs ui: %s is not a loopback address, so every request needs this server's token:\n", *listen)
			}
			fmt.Fprintf(out, "worldfs ui: serving %s on\n    %s\nCtrl-C stops it.\n", b, strings.Join(links, "\n    "))
			if *open {
				if err := exec.Command("xdg-open", link).Start(); err != nil {
					fmt.Fprintf(stderrOf(ctx), "worldfs ui: --open: %v; open the URL above yourself\n", err)
				}
			}
			hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
			served := make(chan error, 1)
			go func() { served <- hs.Serve(ln) }()
			select {
			case err := <-served:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
}

// uiOptions are the web interface's options over b (at url): the views'
// lists in <cacheDir>/views, and a remote bucket read through the disk
// cache, its catalog objects also kept in memory (as worldfs sql does).
// done releases the memory cache.
func uiOptions(b bucket.Bucket, url, cacheDir string, cacheSize int64) (ui.Options, func(), error) {
	opts := ui.Options{Bucket: b, Views: wsql.Options{Dir: filepath.Join(cacheDir, "views")}}
	if _, isLocal := bucket.As[bucket.Local](b); isLocal {
		return opts, func() {}, nil
	}
	c, id, err := openCache(url, cacheDir, cacheSize)
	if err != nil {
		return ui.Options{}, nil, err
	}
	mem, err := cache.NewMemory(256 << 20)
	if err != nil {
		return ui.Options{}, nil, err
	}
	opts.Bucket, opts.Views.Cache, opts.Views.BucketID = mem.Wrap(b), c, id
	return opts, func() { mem.Close() }, nil
}

// serveURLs are the URLs a server on addr answers, with its token: a
// server on every interface is named by the host's name and by loopback.
func serveURLs(addr *net.TCPAddr, token string) []string {
	suffix := "/"
	if token != "" {
		suffix += "?token=" + token
	}
	port := strconv.Itoa(addr.Port)
	if !addr.IP.IsUnspecified() {
		return []string{"http://" + net.JoinHostPort(addr.IP.String(), port) + suffix}
	}
	var out []string
	if h, err := os.Hostname(); err == nil && h != "" {
		out = append(out, "http://"+net.JoinHostPort(h, port)+suffix)
	}
	return append(out, "http://"+net.JoinHostPort("127.0.0.1", port)+suffix)
}

// newToken is a server's token: 24 random bytes, in hex.
func newToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
