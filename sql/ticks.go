package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"math"
	"regexp"
	"slices"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/parquet-go/parquet-go/compress/uncompressed"

	"github.com/worldfs/worldfs/index"
)

// The visible ticks of a view, with when each was published: what
// worldfs_ticks shows, what <table>_changes compares tick by tick and
// what <table>_as_of(instant) resolves to a tick. Like the compacted
// ticks (compacted.go) they cost a row per tick, so no build lists them;
// the script's text holds markTicks where worldfs_ticks reads them, and
//
//   - the script worldfs runs reads them from the table function
//     ticksFunc, which walks the catalog the first time a query needs
//     them, and resolves a tick before another, or at an instant, with
//     the scalar functions tickBeforeFunc and tickAtFunc, whose results
//     DuckDB folds into the file lists of the range it reads, so that
//     only the files holding those ticks are opened;
//   - a script that outlives the process (printed by Script.SQL) reads
//     them from a list written in the views directory (ticks.list), and
//     its macros filter the rows of the views instead (the alternatives
//     between markRun, markPlain and markAltEnd).
const (
	ticksFunc      = "worldfs_published_ticks"
	tickBeforeFunc = "worldfs_tick_before"
	tickAtFunc     = "worldfs_tick_at_ms"
	markTicks      = "\x06"
	// markRun RUN markPlain PLAIN markAltEnd: RUN in the script worldfs
	// runs, PLAIN in the printed one.
	markRun, markPlain, markAltEnd = "\x0e", "\x0f", "\x10"
	ticksServed                    = ticksFunc + "()"
	ticksNone                      = "(SELECT NULL::VARCHAR AS world, NULL::VARCHAR AS run, NULL::BIGINT AS tick, NULL::BIGINT AS published_ms, NULL::VARCHAR AS commit_token, NULL::BIGINT AS writer_epoch WHERE false)"
)

// alt is run in the script worldfs runs and plain in a printed one.
func alt(run, plain string) string { return markRun + run + markPlain + plain + markAltEnd }

var (
	runAlt   = regexp.MustCompile("(?s)" + markPlain + ".*?" + markAltEnd)
	plainAlt = regexp.MustCompile("(?s)" + markRun + ".*?" + markPlain)
)

// runText and plainText pick the alternatives of text.
func runText(text string) string {
	return stripMarks(runAlt.ReplaceAllString(text, ""), markRun)
}

func plainText(text string) string {
	return stripMarks(plainAlt.ReplaceAllString(text, ""), markAltEnd)
}

func stripMarks(s, mark string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != mark[0] {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// tickRow is one visible tick.
type tickRow struct {
	World       string `parquet:"world,dict"`
	Run         string `parquet:"run,dict"`
	Tick        int64  `parquet:"tick"`
	PublishedMs int64  `parquet:"published_ms"` // 0: not recorded
	CommitToken string `parquet:"commit_token"`
	WriterEpoch int64  `parquet:"writer_epoch"`
}

// tickList is the visible ticks from..to of a view, listed once, on first
// use, then shared.
type tickList struct {
	view     func() (*index.View, error)
	from, to int64
	dir      string

	rowsList lazy[[]tickRow] // in tick order
	listPath lazy[string]
}

func (l *tickList) rows() ([]tickRow, error) {
	return l.rowsList.get(func() ([]tickRow, error) {
		v, err := l.view()
		if err != nil {
			return nil, err
		}
		var rows []tickRow
		v.Ticks(l.from, l.to, func(t index.TickRef) bool {
			rows = append(rows, tickRow{World: t.World, Run: t.Run, Tick: t.Tick.Tick, PublishedMs: t.PublishedUnixMs,
				CommitToken: t.CommitToken, WriterEpoch: t.WriterEpoch})
			return true
		})
		return rows, nil
	})
}

// before returns the newest visible tick before t.
func (l *tickList) before(t int64) (int64, bool, error) {
	rows, err := l.rows()
	if err != nil {
		return 0, false, err
	}
	i, _ := slices.BinarySearchFunc(rows, t, func(r tickRow, t int64) int { return cmpInt(r.Tick, t) })
	if i == 0 {
		return 0, false, nil
	}
	return rows[i-1].Tick, true, nil
}

// atMs returns the newest visible tick published at or before ms (Unix
// milliseconds); ticks whose time was not recorded are never chosen.
func (l *tickList) atMs(ms int64) (int64, bool, error) {
	rows, err := l.rows()
	if err != nil {
		return 0, false, err
	}
	best, ok := int64(0), false
	for _, r := range rows {
		if r.PublishedMs > 0 && r.PublishedMs <= ms && (!ok || r.Tick > best) {
			best, ok = r.Tick, true
		}
	}
	return best, ok, nil
}

// firstTick returns the first visible tick of v.
func firstTick(v *index.View) (int64, bool) {
	first, ok := int64(0), false
	v.Ticks(math.MinInt64, math.MaxInt64, func(t index.TickRef) bool {
		first, ok = t.Tick.Tick, true
		return false
	})
	return first, ok
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// list returns the path of the list of l's rows in l.dir, writing it on
// first use (named by the hash of its rows).
func (l *tickList) list() (string, error) {
	return l.listPath.get(func() (string, error) {
		rows, err := l.rows()
		if err != nil {
			return "", err
		}
		return writeRows(l.dir, index.ViewsPublishedFragments, rows, &uncompressed.Codec{})
	})
}

// registerTicks makes ticksFunc, tickBeforeFunc and tickAtFunc (each
// name followed by sfx: see sessions.go) serve l on db.
func registerTicks(ctx context.Context, db *sql.DB, l *tickList, sfx string) error {
	return withTypes(ctx, db, func(conn *sql.Conn, str, bigint, _ duckdb.TypeInfo) error {
		cols := []duckdb.ColumnInfo{{Name: "world", T: str}, {Name: "run", T: str}, {Name: "tick", T: bigint},
			{Name: "published_ms", T: bigint}, {Name: "commit_token", T: str}, {Name: "writer_epoch", T: bigint}}
		err := duckdb.RegisterTableUDF(conn, ticksFunc+sfx, duckdb.RowTableFunction{
			BindArgumentsContext: func(ctx context.Context, _ map[string]any, _ ...any) (duckdb.RowTableSource, error) {
				s, _ := ctx.Value(sinkKey{}).(*sink)
				return &ticksSource{l: l, cols: cols, sink: s}, nil
			},
		})
		if err != nil {
			return err
		}
		for name, fn := range map[string]func(int64) (int64, bool, error){tickBeforeFunc: l.before, tickAtFunc: l.atMs} {
			if err := duckdb.RegisterScalarUDF(conn, name+sfx, tickUDF{fn: fn, t: bigint}); err != nil {
				return err
			}
		}
		return nil
	})
}

// tickUDF is a scalar function of a BIGINT to a tick (NULL: none).
type tickUDF struct {
	fn func(int64) (int64, bool, error)
	t  duckdb.TypeInfo
}

func (u tickUDF) Config() duckdb.ScalarFuncConfig {
	return duckdb.ScalarFuncConfig{InputTypeInfos: []duckdb.TypeInfo{u.t}, ResultTypeInfo: u.t}
}

func (u tickUDF) Executor() duckdb.ScalarFuncExecutor {
	return duckdb.ScalarFuncExecutor{RowContextExecutor: func(ctx context.Context, vals []driver.Value) (any, error) {
		x, _ := vals[0].(int64)
		t, ok, err := u.fn(x)
		if err != nil {
			if s, ok := ctx.Value(sinkKey{}).(*sink); ok {
				s.set(err)
			}
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		return t, nil
	}}
}

// ticksSource is one scan of ticksFunc.
type ticksSource struct {
	l    *tickList
	cols []duckdb.ColumnInfo
	sink *sink

	rows  []tickRow
	ready bool
	i     int
}

func (s *ticksSource) ColumnInfos() []duckdb.ColumnInfo     { return s.cols }
func (s *ticksSource) Cardinality() *duckdb.CardinalityInfo { return nil }
func (s *ticksSource) Init()                                {}

func (s *ticksSource) FillRow(row duckdb.Row) (bool, error) {
	if !s.ready {
		rows, err := s.l.rows()
		if err != nil {
			if s.sink != nil {
				s.sink.set(err)
			}
			return false, err
		}
		s.rows, s.ready = rows, true
	}
	if s.i >= len(s.rows) {
		return false, nil
	}
	r := s.rows[s.i]
	s.i++
	for k, v := range []any{r.World, r.Run, r.Tick, r.PublishedMs, r.CommitToken, r.WriterEpoch} {
		if err := row.SetRowValue(k, v); err != nil {
			return false, err
		}
	}
	return true, nil
}

// ticksViews defines worldfs_ticks: a row per visible tick with when it
// was published, and per table the rows and bytes its manifest records
// (the ticks whose files were compacted share their files: their rows per
// tick are not recorded).
func ticksViews() string {
	return "CREATE OR REPLACE TEMP VIEW worldfs_tick_list AS SELECT * FROM " + markTicks + ";\n" +
		`CREATE OR REPLACE TEMP VIEW worldfs_ticks AS
  SELECT t.world, t.run, t.tick, CASE WHEN t.published_ms > 0 THEN TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(t.published_ms) END AS published_at,
    t.commit_token, t.writer_epoch, s.tables
  FROM worldfs_tick_list t LEFT JOIN (
    SELECT world, run, tick, commit_token, list({'table': view, 'rows': rows, 'bytes': bytes} ORDER BY view) AS tables FROM (
      SELECT world, run, tick, commit_token, view, sum(nullif(rows, -1))::BIGINT AS rows, sum(nullif(bytes, -1))::BIGINT AS bytes
      FROM worldfs_fragments WHERE filtered AND NOT fact AND NOT compacted GROUP BY ALL)
    GROUP BY ALL) s USING (world, run, tick, commit_token);
`
}
