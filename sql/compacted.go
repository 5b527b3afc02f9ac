package sql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/worldfs/worldfs/index"
)

// The ticks whose manifests name compacted files. worldfs_manifests lists
// them tick by tick, but nothing else does: the views read the compacted
// files themselves, each once, from the fragment list. Listing them costs
// a step per tick, so no build does it; the script's text holds
// markCompacted where worldfs_manifests unions them in, and
//
//   - the script worldfs runs in the process that built it (Script.run)
//     reads them from the table function compactedFunc, which walks the
//     catalog the first time a query reads worldfs_manifests;
//   - a script that outlives the process (printed by Script.SQL, or kept
//     for reuse, which a later process runs without the catalog) reads
//     them from a list written in the views directory (compacted.list).
//
// Both read the same rows, from one walk (compacted.rows).
const (
	compactedFunc = "worldfs_compacted_manifests"
	markCompacted = "\x05"
	// compactedServed is the part of worldfs_manifests the table function
	// serves.
	compactedServed = "\n  UNION ALL SELECT world, run, tick, commit_token, writer_epoch, table_id, path, NULL::BIGINT AS rows FROM " + compactedFunc + "()"
)

// compactedFrom is the part of worldfs_manifests read from the list at
// path: its tick rows joined with the members of the set each names.
func compactedFrom(path string) string {
	return "\n  UNION ALL SELECT t.world, t.run, t.tick, t.commit_token, t.writer_epoch, g.table_id, g.object AS path, NULL::BIGINT AS rows\n" +
		"  FROM " + readOne(path) + " t JOIN " + readOne(path) + " g ON t.table_id = '' AND g.table_id <> '' AND g.grp = t.grp"
}

// compacted is what worldfs_manifests shows of the ticks from..to of a
// view whose manifests name compacted files. Its rows are listed once, on
// first use, then shared (by every query, and the list in dir).
type compacted struct {
	// view returns the view (the build's; for a kept script reused, its
	// catalogs loaded again: see reuse.go).
	view     func() (*index.View, error)
	from, to int64
	dir      string

	rowsList lazy[[]compactedRow]
	listPath lazy[string]
}

// rows returns the ticks' rows (TableID empty), in tick order, each with
// the set of compacted files it names (Group), then the members of each
// set. The ticks of a span share their set, which is recognised without
// comparing paths. It fails (index.ErrCorrupt) if a fragment list does not
// decode.
func (c *compacted) rows() ([]compactedRow, error) {
	return c.rowsList.get(c.walk)
}

func (c *compacted) walk() ([]compactedRow, error) {
	view, err := c.view()
	if err != nil {
		return nil, err
	}
	var ticks, members []compactedRow
	byKey := map[string]int32{}
	groups := int32(0)
	var prev *index.Tick
	prevGroup := int32(-1)
	var key strings.Builder
	view.Ticks(c.from, c.to, func(t index.TickRef) bool {
		g := prevGroup
		if !t.SameTables(prev) {
			var tables []index.TableFragments
			if tables, err = t.Tables(); err != nil {
				return false
			}
			key.Reset()
			var set []compactedRow
			for _, tf := range tables {
				for _, f := range tf.Fragments {
					if f.Span != nil {
						fmt.Fprintf(&key, "%s\x00%s\x00", tf.Table, f.Path)
						set = append(set, compactedRow{World: t.World, Run: t.Run, TableID: tf.Table, Object: f.Path})
					}
				}
			}
			g = -1
			if len(set) > 0 {
				var ok bool
				if g, ok = byKey[key.String()]; !ok {
					g = groups
					groups++
					byKey[key.String()] = g
					for _, m := range set {
						m.Group = g
						members = append(members, m)
					}
				}
			}
			prev, prevGroup = t.Tick, g
		}
		if g >= 0 {
			ticks = append(ticks, compactedRow{World: t.World, Run: t.Run, Tick: t.Tick.Tick, CommitToken: t.CommitToken, WriterEpoch: t.WriterEpoch, Group: g})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return append(ticks, members...), nil
}

// list returns the path of the list of c's rows in c.dir, writing it on
// first use.
func (c *compacted) list() (string, error) {
	return c.listPath.get(func() (string, error) {
		rows, err := c.rows()
		if err != nil {
			return "", err
		}
		return writeCompacted(c.dir, rows)
	})
}

// finish sets the SQL worldfs runs from the script's text, serving the
// compacted ticks from compactedFunc and the visible ticks from ticksFunc,
// and the plain SQL if it reads neither.
func (s *Script) finish() {
	part, ticks := "", ticksNone
	if s.compacted != nil {
		part = compactedServed
	}
	if s.ticks != nil {
		ticks = ticksServed
	}
	if s.compacted == nil && s.ticks == nil {
		s.plain = plainSQL.Replace(plainText(strings.NewReplacer(markCompacted, "", markTicks, ticksNone).Replace(s.text)))
	}
	// Without the ticks served, the macros take their printed form.
	pick := plainText
	if s.ticks != nil {
		pick = runText
	}
	s.run = checkedSQL.Replace(pick(strings.NewReplacer(markCompacted, part, markTicks, ticks).Replace(s.text)))
}

// printed returns the plain SQL of a script that reads compacted or
// visible ticks: from their lists, written now if they are not there.
func (s *Script) printed() (string, error) {
	part, ticks := "", ticksNone
	if s.compacted != nil {
		path, err := s.compacted.list()
		if err != nil {
			return "", err
		}
		part = compactedFrom(path)
	}
	if s.ticks != nil {
		path, err := s.ticks.list()
		if err != nil {
			return "", err
		}
		ticks = readOne(path)
	}
	return plainSQL.Replace(plainText(strings.NewReplacer(markCompacted, part, markTicks, ticks).Replace(s.text))), nil
}

// registerCompacted makes compactedFunc (called name: see sessions.go)
// serve c's rows on db.
func registerCompacted(ctx context.Context, db *sql.DB, c *compacted, name string) error {
	return withTypes(ctx, db, func(conn *sql.Conn, str, bigint, _ duckdb.TypeInfo) error {
		cols := []duckdb.ColumnInfo{{Name: "world", T: str}, {Name: "run", T: str}, {Name: "tick", T: bigint},
			{Name: "commit_token", T: str}, {Name: "writer_epoch", T: bigint}, {Name: "table_id", T: str}, {Name: "path", T: str}}
		return duckdb.RegisterTableUDF(conn, name, duckdb.RowTableFunction{
			BindArgumentsContext: func(ctx context.Context, _ map[string]any, _ ...any) (duckdb.RowTableSource, error) {
				s, _ := ctx.Value(sinkKey{}).(*sink)
				return &compactedSource{c: c, cols: cols, sink: s}, nil
			},
		})
	})
}

// compactedSource is one scan of compactedFunc: each tick row of c joined
// with the members of its set.
type compactedSource struct {
	c    *compacted
	cols []duckdb.ColumnInfo
	sink *sink // the query's, if any: gets the error of listing the rows

	ready  bool
	ticks  []compactedRow   // the tick rows
	groups [][]compactedRow // the members of each set
	i, j   int              // the next row: member j of tick i's set
}

func (s *compactedSource) ColumnInfos() []duckdb.ColumnInfo     { return s.cols }
func (s *compactedSource) Cardinality() *duckdb.CardinalityInfo { return nil }

// Init does nothing: the rows are listed (once) by the first FillRow, so
// that binding a query, or defining the views, walks no catalog.
func (s *compactedSource) Init() {}

func (s *compactedSource) FillRow(row duckdb.Row) (bool, error) {
	if !s.ready {
		rows, err := s.c.rows()
		if err != nil {
			if s.sink != nil {
				s.sink.set(err)
			}
			return false, err
		}
		n := 0 // the tick rows come first
		for n < len(rows) && rows[n].TableID == "" {
			n++
		}
		s.ticks, s.ready = rows[:n], true
		for _, m := range rows[n:] {
			for int(m.Group) >= len(s.groups) {
				s.groups = append(s.groups, nil)
			}
			s.groups[m.Group] = append(s.groups[m.Group], m)
		}
	}
	for s.i < len(s.ticks) && s.j >= len(s.groups[s.ticks[s.i].Group]) {
		s.i, s.j = s.i+1, 0
	}
	if s.i >= len(s.ticks) {
		return false, nil
	}
	t, m := s.ticks[s.i], s.groups[s.ticks[s.i].Group][s.j]
	s.j++
	for k, v := range []any{t.World, t.Run, t.Tick, t.CommitToken, t.WriterEpoch, m.TableID, m.Object} {
		if err := row.SetRowValue(k, v); err != nil {
			return false, err
		}
	}
	return true, nil
}
