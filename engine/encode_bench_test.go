package engine_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/worldfs/worldfs/engine"
)

// The encoder against DuckDB writing the same rows: 10,000 rows of one
// bench-ticks archetype (entity, tick, token, epoch, position x/y/z, id),
// zstd. Besides time per file, each reports the process's CPU time per
// file (cpu-ms/op, every thread counted, DuckDB's too), which a loaded
// machine disturbs less than wall time, and the file's size. Run with
//
//	go test -run '^$' -bench 'Encode' -benchmem ./engine/
func BenchmarkEncode10k(b *testing.B) {
	for _, rows := range []int{10000, 50} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			pos, _ := engine.NewComponent("position", engine.Field{Name: "x", Type: engine.Float64}, engine.Field{Name: "y", Type: engine.Float64}, engine.Field{Name: "z", Type: engine.Float64})
			kind, _ := engine.NewComponent("kind0", engine.Field{Name: "id", Type: engine.Int64})
			t, _ := engine.NewTable("a0", pos, kind)
			f := engine.NewFrame(t)
			for i := range rows {
				if err := f.Append(int64(i), engine.Values{"position_x": float64(i) * 0.5, "position_y": float64(i) * 0.25, "position_z": 1.0, "kind0_id": int64(i)}); err != nil {
					b.Fatal(err)
				}
			}
			stamp := engine.Stamp{Tick: 7, CommitToken: "0123456789abcdef0123456789abcdef", WriterEpoch: 1}
			var size int
			cpu := cpuTime()
			for b.Loop() {
				data, err := engine.EncodeFragment(f, stamp)
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(size), "bytes/file")
		})
	}
}

// BenchmarkEncode10kDuckDBCopy writes the same rows with DuckDB's COPY, at
// its default zstd level and at level 1.
func BenchmarkEncode10kDuckDBCopy(b *testing.B) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE rows AS SELECT i::BIGINT AS entity_id, 7::BIGINT AS tick, '0123456789abcdef0123456789abcdef' AS commit_token,
		1::BIGINT AS writer_epoch, i * 0.5 AS position_x, i * 0.25 AS position_y, 1.0::DOUBLE AS position_z, i::BIGINT AS kind0_id FROM range(10000) r(i)`); err != nil {
		b.Fatal(err)
	}
	for _, level := range []string{"", ", COMPRESSION_LEVEL 1"} {
		name := "level=default"
		if level != "" {
			name = "level=1"
		}
		b.Run(name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "x.parquet")
			cpu := cpuTime()
			for b.Loop() {
				if _, err := db.Exec(`COPY rows TO '` + out + `' (FORMAT parquet, COMPRESSION zstd` + level + `)`); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			if info, err := os.Stat(out); err == nil {
				b.ReportMetric(float64(info.Size()), "bytes/file")
			}
		})
	}
}

// cpuTime is the CPU time this process has used, every thread counted.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64((cpuTime()-since).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
