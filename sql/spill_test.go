package sql

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A confined database still spills a query larger than its memory to
// disk, in a directory of its own under the directory it is given (the
// views directory, in the cache), which it removes when it closes.
func TestConfinedDatabaseSpills(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{"SET memory_limit = '64MB'", "SET threads = 1"} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := lockDown(ctx, db, []string{dir}, nil, dir); err != nil {
		t.Fatal(err)
	}
	var n int64
	// About 300 MB of strings to sort in 64 MB.
	if err := db.QueryRow("SELECT count(*) FROM (SELECT md5(i::VARCHAR) || md5((i + 1)::VARCHAR) || md5((i + 2)::VARCHAR) AS h FROM range(3000000) t(i) ORDER BY h)").Scan(&n); err != nil || n != 3000000 {
		t.Fatalf("a sort larger than memory: %d %v", n, err)
	}
	spills, _ := filepath.Glob(filepath.Join(dir, "spill-*"))
	if len(spills) != 1 {
		t.Fatalf("spill directories %v, want one under %s", spills, dir)
	}
	var tmp string
	db.QueryRow("SELECT current_setting('temp_directory')").Scan(&tmp)
	if !strings.HasPrefix(tmp, dir) {
		t.Fatalf("temp_directory %s is not under %s", tmp, dir)
	}
	db.Close()
	if _, err := os.Stat(spills[0]); !os.IsNotExist(err) {
		t.Fatalf("%s outlived the database", spills[0])
	}
}
