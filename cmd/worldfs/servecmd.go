package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/serve"
	wsql "github.com/worldfs/worldfs/sql"
)

// passwordEnv is the environment variable a password of worldfs serve may
// come from (never a flag: a flag's value is in ps and the shell's
// history).
const passwordEnv = "WORLDFS_SERVE_PASSWORD"

// serveCmd is "worldfs serve".
func serveCmd() command {
	var url, listen, cacheDir, run, passwordFile, tlsCert, tlsKey *string
	var cacheSize, queryMemory *int64
	var maxConns, threads *int
	var idleTimeout, statementTimeout *time.Duration
	return command{
		name: "serve",
		summary: "answer PostgreSQL clients (psql, pandas with psycopg2, node-postgres, JDBC, Grafana, DBeaver) with the bucket's worlds: the database names a world, " +
			"SET worldfs.at = 'POINT' pins a tick (default: the head, as it moves); the views and read-only gate of worldfs sql. " +
			"Loopback only without a password; another --listen address needs one (--password-file or $" + passwordEnv + "), checked by SCRAM-SHA-256",
		example: "worldfs serve --bucket ./worldfs-data   # then: psql -h 127.0.0.1 -p 5433 -d WORLD -c 'SELECT count(*) FROM particle_at(100)'\n" +
			"  WORLDFS_SERVE_PASSWORD=s3cret worldfs serve --bucket ./worldfs-data --listen 0.0.0.0:5433 --tls-cert server.crt --tls-key server.key",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			listen = fs.String("listen", "127.0.0.1:5433", "`host:port` to listen on; an address that is not loopback requires a password")
			run = fs.String("run", index.DefaultRun, "the run sessions read (a session changes it: SET worldfs.run = 'name')")
			passwordFile = fs.String("password-file", "", "`file` holding the password every client must give (its first line); or set $"+passwordEnv)
			tlsCert = fs.String("tls-cert", "", "PEM certificate `file` offered to clients that ask for TLS (with --tls-key); without it they are told the server has none")
			tlsKey = fs.String("tls-key", "", "PEM private key `file` of --tls-cert")
			maxConns = fs.Int("max-conns", serve.DefaultMaxConns, "sessions open at once; a client past it is refused (SQLSTATE 53300)")
			idleTimeout = fs.Duration("idle-timeout", serve.DefaultIdleTimeout, "close a session that sends nothing, or reads nothing of a result, for this long")
			statementTimeout = fs.Duration("statement-timeout", serve.DefaultStatementTimeout, "stop a statement that runs longer (SQLSTATE 57014); a session may lower it")
			queryMemory = sizeFlag(fs, "query-memory", serve.DefaultQueryMemory, "what one session's statement may hold in DuckDB (its memory_limit); past it the statement spills or fails (SQLSTATE 53200)")
			threads = fs.Int("threads", 0, "DuckDB threads per session (0: one per core)")
			cacheDir = fs.String("cache-dir", defaultCacheDir(), "where copies of a remote bucket's fragments, and the views' fragment lists, are kept")
			cacheSize = sizeFlag(fs, "cache-size", cache.DefaultMaxBytes, "how much the fragment cache may hold")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 0 {
				return usagef("serve takes no arguments")
			}
			password, err := servePassword(*passwordFile)
			if err != nil {
				return err
			}
			if err := serve.CheckListen(*listen, password != ""); err != nil {
				if errors.Is(err, serve.ErrNeedsPassword) {
					return usagef("--listen %s: %v", *listen, err)
				}
				return usagef("--listen: %v", err)
			}
			if err := index.ValidateRunName(*run); err != nil {
				return usagef("--run: %v", err)
			}
			tlsConfig, err := serveTLS(*tlsCert, *tlsKey)
			if err != nil {
				return err
			}
			b, err := openExisting(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			opts := serve.Options{
				Bucket: b, Views: wsql.Options{Dir: filepath.Join(*cacheDir, "views"), Run: *run},
				Password: password, TLS: tlsConfig, MaxConns: *maxConns, IdleTimeout: *idleTimeout,
				StatementTimeout: *statementTimeout, QueryMemory: *queryMemory, Threads: *threads,
				Log: slog.New(slog.NewTextHandler(stderrOf(ctx), nil)),
			}
			if _, isLocal := bucket.As[bucket.Local](b); !isLocal {
				c, id, err := openCache(*url, *cacheDir, *cacheSize)
				if err != nil {
					return err
				}
				mem, err := cache.NewMemory(256 << 20)
				if err != nil {
					return err
				}
				defer mem.Close()
				opts.Bucket, opts.Views.Cache, opts.Views.BucketID = mem.Wrap(b), c, id
			}
			return serveUntilDone(ctx, opts, b, *listen, out)
		},
	}
}

// serveTLS is the TLS configuration of --tls-cert and --tls-key: nil
// without them, an error with one alone or with files that do not load.
func serveTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, usagef("--tls-cert %s, --tls-key %s: %v", certFile, keyFile, err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	case certFile != "" || keyFile != "":
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	return nil, nil
}

// serveUntilDone starts the server of opts on listen, says where and how
// to connect, and serves until it fails or ctx ends (Ctrl-C).
func serveUntilDone(ctx context.Context, opts serve.Options, b bucket.Bucket, listen string, out io.Writer) error {
	srv, err := serve.New(opts)
	if err != nil {
		return usagef("%v", err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", listen, err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	auth := "any user, no password"
	if opts.Password != "" {
		auth = "a password (SCRAM-SHA-256)"
	}
	fmt.Fprintf(out, "worldfs serve: serving %s on %s (PostgreSQL protocol; %s%s)\n", b, ln.Addr(), auth, map[bool]string{true: ", TLS offered", false: ""}[opts.TLS != nil])
	fmt.Fprintf(out, "    psql -h %s -p %s -d WORLD        # the database names a world: worldfs worlds lists them\nCtrl-C stops it.\n", host, port)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	return srv.Close()
}

// servePassword is the password clients must give: the first line of
// file, else $WORLDFS_SERVE_PASSWORD, else none.
func servePassword(file string) (string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", usagef("--password-file: %v", err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		line = strings.TrimRight(line, "\r")
		if line == "" {
			return "", usagef("--password-file %s: its first line is empty; write the password there", file)
		}
		return line, nil
	}
	return os.Getenv(passwordEnv), nil
}
