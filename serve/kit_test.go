package serve_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/enginetest"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/realpart"
	"github.com/worldfs/worldfs/serve"
	wsql "github.com/worldfs/worldfs/sql"
)

// fixture is a bucket with worlds and a server over it on loopback.
type fixture struct {
	b    bucket.Bucket
	dir  string // the views directory
	srv  *serve.Server
	addr string // host:port
}

// lastTick is the head of the particle world w every fixture holds.
const lastTick = 8

// newFixture makes a bucket with the particle world "w" run to lastTick
// and the world "typed" (typedWorld), and serves it with opts (edit may
// change them).
func newFixture(t testing.TB, edit func(*serve.Options)) *fixture {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.World(t, b, "w", lastTick)
	typedWorld(t, b)
	return serveBucket(t, b, edit)
}

// serveBucket serves b on a loopback port until the test ends.
func serveBucket(t testing.TB, b bucket.Bucket, edit func(*serve.Options)) *fixture {
	t.Helper()
	f := &fixture{b: b, dir: t.TempDir()}
	opts := serve.Options{Bucket: b, Views: wsql.Options{Dir: f.dir}}
	if edit != nil {
		edit(&opts)
	}
	srv, err := serve.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.srv, f.addr = srv, ln.Addr().String()
	return f
}

// typedWorld creates world "typed": one table, sample, with a column of
// every type a table's field may have, and two ticks.
func typedWorld(t testing.TB, b bucket.Bucket) {
	t.Helper()
	ctx := enginetest.Context(t)
	c, err := engine.ComponentOf[struct {
		Mass   float64
		Charge float32
		Count  int64
		Level  int32
		Alive  bool
		Kind   string
	}]("s")
	if err != nil {
		t.Fatal(err)
	}
	sample, err := engine.NewTable("sample", c)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.CreateWorld(ctx, b, "typed", []*engine.Table{sample}, enginetest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, v := range []engine.Values{
		{"s_mass": 1.5, "s_charge": float32(-0.25), "s_count": int64(1) << 40, "s_level": int32(-7), "s_alive": true, "s_kind": "grazer"},
		{"s_mass": 0.1, "s_charge": float32(3), "s_count": int64(-3), "s_level": int32(2), "s_alive": false, "s_kind": "a \"quoted\", comma"},
	} {
		if _, err := w.Spawn("sample", v); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// connect returns a pgx connection to world db of f, closed when the
// test ends; options are extra connection parameters (key=value).
func (f *fixture) connect(t *testing.T, db string, options ...string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(enginetest.Context(t), f.dsn(db, options...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// dsn is a keyword/value connection string to world db of f.
func (f *fixture) dsn(db string, options ...string) string {
	host, port, _ := net.SplitHostPort(f.addr)
	return strings.Join(append([]string{"host=" + host, "port=" + port, "user=anyone", "dbname=" + db, "sslmode=disable"}, options...), " ")
}

// reference is what worldfs sql --format csv prints for query on world
// at pin (nil: the head): sql.Run's CSV, on views built as worldfs sql
// builds them.
func (f *fixture) reference(t *testing.T, world, query string, at *index.Moment) string {
	t.Helper()
	ctx := enginetest.Context(t)
	opts := wsql.Options{Dir: t.TempDir()}
	if at != nil {
		opts.At, opts.Only = at, true
	}
	s, err := wsql.Build(ctx, f.b, world, opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := wsql.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out bytes.Buffer
	if err := wsql.Run(ctx, db, query, wsql.FormatCSV, &out, nil); err != nil {
		t.Fatalf("worldfs sql %q: %v", query, err)
	}
	return out.String()
}

// tool returns the path of a command a test runs (a real part).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		realpart.Missing(t, name, err.Error())
	}
	return p
}

// python returns a Python 3 that imports psycopg2 and pandas (Debian's
// python3-psycopg2 and python3-pandas, in /usr/bin; another python3 on
// PATH may lack them).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import psycopg2, pandas").Run() == nil {
			return path
		}
	}
	realpart.Missing(t, "python3 with psycopg2 and pandas", "apt-get install python3-psycopg2 python3-pandas")
	return ""
}

// nodePG installs node-postgres (testdata/pg, versions pinned by its
// lock file) into the test's temporary directory, beside query.js, and
// returns the directory.
func nodePG(t *testing.T) string {
	t.Helper()
	tool(t, "node")
	npm := tool(t, "npm")
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "query.js"} {
		data, err := os.ReadFile(filepath.Join("testdata", "pg", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, ".npm"), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci (pg): %v\n%s", err, out)
	}
	return dir
}

// viewsOptions are the views' options of a server a test builds itself.
func viewsOptions(t *testing.T) wsql.Options { return wsql.Options{Dir: t.TempDir()} }
