package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldfs/worldfs/index"
	wsql "github.com/worldfs/worldfs/sql"
)

// errDiffers: diff --exit-code found the two sides different.
var errDiffers = errors.New("the two sides differ")

// side is one side of a diff as typed: a world, and the point of its
// run (nil: its head).
type side struct {
	world string
	at    *index.Moment
}

// parsePoint parses W, W@POINT or @POINT (world taken from dflt); POINT
// is any form index.ParseMoment takes (170, head~10, 10:00, a token, …),
// or a tag's bare name (index.ParseMomentOrTag: w1@fig3).
func parsePoint(arg, dflt string, now time.Time) (side, error) {
	world, point, hasPoint := strings.Cut(arg, "@")
	if world == "" {
		world = dflt
	}
	if world == "" {
		return side{}, usagef("%q names no world: W, W@POINT (the first side names its world)", arg)
	}
	p := side{world: world}
	if hasPoint {
		m, err := index.ParseMomentOrTag(point, now)
		if err != nil {
			return side{}, usagef("%s: %v", arg, err)
		}
		p.at = &m
	}
	return p, nil
}

// resolve is the diff side p in the session s: its tick resolved among
// the visible ticks of its world.
func (p side) resolve(s *wsql.Script) (wsql.Point, error) {
	pt := wsql.Point{World: p.world}
	if p.at == nil {
		return pt, nil
	}
	t, ok, err := s.Resolve(p.world, *p.at)
	if err != nil {
		return pt, fmt.Errorf("%s@%s: %w", p.world, p.at.Text, err)
	}
	if !ok {
		return pt, notFoundError{fmt.Sprintf("%s@%s: no tick of %s was published at or before %s (the views' worldfs_ticks lists when each was)",
			p.world, p.at.Text, p.world, p.at.Time.Format(time.RFC3339))}
	}
	pt.Tick = &t
	return pt, nil
}

// diffCmd is "worldfs diff".
func diffCmd() command {
	var vf *viewFlags
	var table, outFile *string
	var asJSON, rows, exitCode *bool
	return command{
		name: "diff",
		summary: "the entities inserted, deleted and updated between two (world, point) sides, per table and column; the head of each side by default. " +
			"POINT is " + index.MomentForms + "; or a tag's bare name (w1@fig3)",
		usage: "W[@POINT] [W2][@POINT2]",
		example: "worldfs diff --bucket ./worldfs-data w1@100 @200                 # two ticks of one world\n" +
			"  worldfs diff --bucket ./worldfs-data w1@head~10 @head             # the last ten ticks\n" +
			"  worldfs diff --bucket ./worldfs-data w1@10:00 @-1m                 # the world at 10:00 today against a minute ago\n" +
			"  worldfs diff --bucket ./worldfs-data w1@170 w1-fork@170 --rows    # a fork against its parent\n" +
			"  worldfs diff --bucket ./worldfs-data w1@100 --table particle --out changes.parquet --exit-code",
		flags: func(fs *flag.FlagSet) {
			vf = addSessionFlags(fs)
			table = fs.String("table", "", "compare only this table")
			asJSON = fs.Bool("json", false, "print one JSON object")
			rows = fs.Bool("rows", false, "print the changed rows too (DuckLake's change_type: insert, delete, update_preimage, update_postimage)")
			outFile = fs.String("out", "", "write the changed rows of every table compared (a column table first) to this file, in the format its extension names: .csv, .json, .jsonl or .parquet")
			exitCode = fs.Bool("exit-code", false, "exit with status 1 when the two sides differ (as git diff --exit-code), else 0")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("diff takes one or two sides: W[@POINT] [W2][@POINT2]")
			}
			sa, sb, err := diffSides(args)
			if err != nil {
				return err
			}
			if *outFile != "" {
				if _, ok := wsql.ExportFormats[strings.ToLower(filepath.Ext(*outFile))]; !ok {
					return usagef("--out %s: the format comes from the extension: .csv, .json, .jsonl (.ndjson) or .parquet", *outFile)
				}
			}
			worlds := []string{sa.world}
			if sb.world != sa.world {
				worlds = append(worlds, sb.world)
			}
			s, refuse, done, err := vf.buildWorlds(ctx, worlds)
			if err != nil {
				return err
			}
			defer done()
			db, err := wsql.Open(ctx, s)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := diffHasTable(s, worlds, *table); err != nil {
				return err
			}
			a, err := sa.resolve(s)
			if err != nil {
				return err
			}
			b, err := sb.resolve(s)
			if err != nil {
				return err
			}
			report, err := wsql.Diff(ctx, db, s, a, b, *table, *rows)
			if err != nil {
				return err
			}
			if *outFile != "" {
				if err := writeDiffRows(ctx, s, report, *outFile, refuse); err != nil {
					return err
				}
			}
			if err := printDiffReport(out, report, *asJSON); err != nil {
				return err
			}
			if *exitCode && report.Differ {
				return errDiffers
			}
			return nil
		},
	}
}

// printDiffReport prints the report as printDiff does, or as indented
// JSON.
func printDiffReport(out io.Writer, report *wsql.DiffReport, asJSON bool) error {
	if !asJSON {
		return printDiff(out, report)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// diffSides reads diff's one or two sides: the second names the first's
// world when it names none; one side alone needs a point (compared with
// its head).
func diffSides(args []string) (sa, sb side, err error) {
	now := time.Now()
	if sa, err = parsePoint(args[0], "", now); err != nil {
		return sa, sb, err
	}
	sb = side{world: sa.world}
	if len(args) == 2 {
		sb, err = parsePoint(args[1], sa.world, now)
		return sa, sb, err
	}
	if sa.at == nil {
		return sa, sb, usagef("one side without a point compares its head with itself: name one (W@170, W@head~10, W@10:00) or a second side")
	}
	return sa, sb, nil
}

// diffHasTable checks that --table, if given, names a table of one of
// the worlds compared.
func diffHasTable(s *wsql.Script, worlds []string, table string) error {
	if table == "" {
		return nil
	}
	var names []string
	for _, w := range worlds {
		names = append(names, s.ViewsOf(w)...)
	}
	if slices.Contains(names, table) {
		return nil
	}
	return notFoundError{fmt.Sprintf("--table %s: no table %q in %s%s Their tables: %s",
		table, table, strings.Join(worlds, " or "), orStop(table, names), quotedAll(slices.Compact(slices.Sorted(slices.Values(names)))))}
}

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// writeDiffRows writes the changed rows of every table both sides of
// report have to path, in the format its extension names (diff --out).
func writeDiffRows(ctx context.Context, s *wsql.Script, report *wsql.DiffReport, path string, refuse []string) error {
	var qs []string
	for _, td := range report.Tables {
		if td.OnlyIn == "" {
			qs = append(qs, fmt.Sprintf("SELECT %s AS \"table\", * FROM (%s)", lit(td.Table), wsql.DiffQuery(s, td.Table, report.A, report.B)))
		}
	}
	if len(qs) == 0 {
		return fmt.Errorf("--out: no table both sides have")
	}
	return wsql.Export(ctx, s, strings.Join(qs, " UNION ALL BY NAME "), path, refuse, stderrOf(ctx))
}

// printDiff prints report as text: per table its counts, per column its
// changes, and the changed rows if the report has them.
func printDiff(out io.Writer, r *wsql.DiffReport) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s@%d -> %s@%d\n", r.A.World, *r.A.Tick, r.B.World, *r.B.Tick)
	fmt.Fprintln(tw, "TABLE\tINSERTED\tDELETED\tUPDATED\tUNCHANGED\t")
	for _, td := range r.Tables {
		name := td.Table
		if td.OnlyIn != "" {
			name += " (only in " + td.OnlyIn + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", name, td.Inserted, td.Deleted, td.Updated, td.Unchanged)
	}
	fmt.Fprintln(tw, "\nTABLE\tCOLUMN\tCHANGED\tMAX |CHANGE|\t")
	for _, td := range r.Tables {
		for _, c := range td.Columns {
			m := "-"
			if c.MaxAbsChange != nil {
				m = strconv.FormatFloat(*c.MaxAbsChange, 'g', -1, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t\n", td.Table, c.Column, c.Changed, m)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, td := range r.Tables {
		if len(td.Rows) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", td.Table)
		var cols []string
		for k := range td.Rows[0] {
			cols = append(cols, k)
		}
		order := map[string]int{"change_type": 0, "entity_id": 1, "tick": 2}
		sortCols(cols, order)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, row := range td.Rows {
			cells := make([]string, len(cols))
			for i, c := range cols {
				cells[i] = fmt.Sprint(row[c])
				if row[c] == nil {
					cells[i] = "NULL"
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// sortCols puts the columns of order first (in its order), the rest by
// name.
func sortCols(cols []string, order map[string]int) {
	rank := func(c string) (int, string) {
		if r, ok := order[c]; ok {
			return r, ""
		}
		return len(order), c
	}
	for i := 1; i < len(cols); i++ {
		for j := i; j > 0; j-- {
			ra, na := rank(cols[j-1])
			rb, nb := rank(cols[j])
			if ra < rb || ra == rb && na <= nb {
				break
			}
			cols[j-1], cols[j] = cols[j], cols[j-1]
		}
	}
}
