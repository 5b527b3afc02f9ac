package sql

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	duckdb "github.com/duckdb/duckdb-go/v2" // also the "duckdb" database/sql driver
)

// Open returns an in-memory DuckDB with the script's views defined,
// confined to reading what the views read (lockDown): it can read no
// other file, install or load no extension, and its settings are locked.
// It can still write inside the directories the views read, so user SQL
// goes through Run or Export, which admit only statements that read.
func Open(ctx context.Context, s *Script) (*sql.DB, error) {
	db, _, err := open(ctx, s, nil)
	return db, err
}

// Limits bound what a database Open returns may use; a zero field keeps
// DuckDB's default. They are set before its configuration is locked, so
// no statement can raise them.
type Limits struct {
	// Memory is DuckDB's memory_limit, in bytes: what the database may
	// hold for its queries (a result it materializes included). Past it
	// a query spills to the views directory where it can, and fails with
	// DuckDB's "Out of Memory Error" where it cannot.
	Memory int64
	// Threads is DuckDB's threads setting.
	Threads int
}

// OpenWith is Open, with the database bounded by l.
func OpenWith(ctx context.Context, s *Script, l Limits) (*sql.DB, error) {
	db, _, err := openWith(ctx, s, nil, l)
	return db, err
}

// open is Open, with the files in writable (an internal COPY's output)
// also allowed; it returns the directories the database may read.
func open(ctx context.Context, s *Script, writable []string) (*sql.DB, []string, error) {
	return openWith(ctx, s, writable, Limits{})
}

// openWith is open, bounded by l.
func openWith(ctx context.Context, s *Script, writable []string, l Limits) (*sql.DB, []string, error) {
	db, err := openDuckDB()
	if err != nil {
		return nil, nil, err
	}
	// The files the views read are verified as queries read them.
	r := newReader(s)
	if err := r.register(ctx, db); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	if err := s.register(ctx, db); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	// The script is worldfs's own SQL: it runs first, then the database is
	// confined to the files the views it defined read.
	script := s.runText()
	r.defining.Store(true)
	sctx, sink := withSink(ctx)
	_, err = db.ExecContext(sctx, script)
	r.defining.Store(false)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("defining the views of world %s: %w", s.World, sink.or(err))
	}
	// The table macros the views defined, listed for the gate (reads):
	// asking DuckDB for them (duckdb_functions()) costs a query 30 ms.
	var macros []string
	for _, m := range s.Macros() {
		macros = append(macros, lit(strings.ToLower(m)))
	}
	_, err = db.ExecContext(ctx, "CREATE TEMP TABLE "+macroTable+" AS SELECT unnest(["+strings.Join(macros, ", ")+"]::VARCHAR[]) AS name")
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	if v := s.Visible; v != nil {
		_, err = db.ExecContext(ctx, fmt.Sprintf("SET VARIABLE %s = {'world': %s, 'run': %s, 'first': %d, 'head': %d, 'at': %d}",
			visibleVar, lit(s.World), lit(s.Run), v.From, v.To, s.AtTick))
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
		}
	}
	dirs, paths, err := readDirs(ctx, db, s)
	if err == nil {
		err = limit(ctx, db, l)
	}
	if err == nil {
		err = lockDown(ctx, db, dirs, append(paths, writable...), filepath.Dir(s.FragmentList))
	}
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("views of world %s: %w", s.World, err)
	}
	return db, dirs, nil
}

// Formats of Run's output.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Run executes query, one statement that must only read (gate: nothing
// runs unless it does; several statements are refused whole,
// ErrSeveralStatements, after each is checked), and writes its result to
// out in format. notes, if not nil, gets a line for
// each tick a statement's <table>_at(t) names that is not a visible tick
// of the run (noteTicks): the query runs all the same.
//
// DuckDB renders the values, not Go: in table and csv output each value
// is what CAST(value AS VARCHAR) gives in the same session (so
// TIMESTAMPTZ in its TimeZone), and in json output each is what to_json
// gives, with every value JSON has no type for (DECIMAL, dates and times,
// INTERVAL, UUID, BLOB, …) as its VARCHAR form, and 64-bit and larger
// integers and floats as JSON numbers only when a reader that parses
// numbers as doubles gets them exactly (see rendered).
func Run(ctx context.Context, db *sql.DB, query, format string, out, notes io.Writer) error {
	switch format {
	case FormatTable:
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		err := Cells(ctx, db, query, notes, func(cells []string) error {
			_, err := fmt.Fprintln(tw, strings.Join(cells, "\t"))
			return err
		})
		if err != nil {
			return err
		}
		return tw.Flush()
	case FormatCSV:
		cw := csv.NewWriter(out)
		err := Cells(ctx, db, query, notes, func(cells []string) error {
			if len(cells) == 1 && cells[0] == "" {
				// A lone empty field would be an empty line, which CSV
				// readers skip.
				cw.Flush()
				_, err := io.WriteString(out, "\"\"\n")
				return err
			}
			return cw.Write(cells)
		})
		if err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	case FormatJSON:
		return runJSON(ctx, db, query, out, notes)
	}
	return fmt.Errorf("unknown format %q (table, csv or json)", format)
}

// Cells runs query as Run does (the gate, the notes) and gives its result
// as text, each value as Run's table and csv formats print it (NULL as
// NULL): row gets the column names first, then each row's values, and
// must not keep the slice; its error stops the run and is returned. Run's
// table and csv formats are Cells written out; a caller that keeps the
// values (the web interface) takes them without a text format between.
func Cells(ctx context.Context, db *sql.DB, query string, notes io.Writer, row func(cells []string) error) error {
	ctx, sink := withSink(ctx)
	conn, last, q, err := begin(ctx, db, query, FormatCSV, notes)
	if err != nil {
		return sink.or(err)
	}
	defer conn.Close()
	if q == "" { // EXPLAIN, a PRAGMA: text, numbers and booleans
		rows, err := conn.QueryContext(ctx, last.text)
		if err != nil {
			return sink.or(err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err == nil {
			err = row(cols)
		}
		if err != nil {
			return err
		}
		cells := make([]string, len(cols))
		return sink.or(scan(rows, len(cols), func(vals []any) error {
			for i, v := range vals {
				cells[i] = cell(v)
			}
			return row(cells)
		}))
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return sink.or(err)
	}
	defer rows.Close()
	cells := make([]string, len(last.cols))
	for i, c := range last.cols {
		cells[i] = c.name
	}
	if err := row(cells); err != nil {
		return err
	}
	return sink.or(scanText(rows, len(cells), func(vals []sql.NullString) error {
		for i, v := range vals {
			cells[i] = nullString(v)
		}
		return row(cells)
	}))
}

// Values runs query as Cells does (the gate, the notes) and gives its
// result typed, for a caller that sends numbers as numbers: cols gets the
// column names, then row each row's values (row must not keep the slice;
// its error stops the run and is returned). A value is nil (NULL), a bool,
// an int64 (every integer type of up to 64 bits but UBIGINT), a float32
// (FLOAT) or float64 (DOUBLE), or a string: VARCHAR's own, and a value of
// every other type (UBIGINT, HUGEINT, DECIMAL, a date, a list, …) as Cells
// gives it, CAST(value AS VARCHAR). EXPLAIN and PRAGMA give their values
// as Cells does.
func Values(ctx context.Context, db *sql.DB, query string, notes io.Writer, cols func(names []string) error, row func(vals []any) error) error {
	ctx, sink := withSink(ctx)
	conn, last, q, err := begin(ctx, db, query, formatValues, notes)
	if err != nil {
		return sink.or(err)
	}
	defer conn.Close()
	text := q == "" // EXPLAIN, a PRAGMA: run as written, given as Cells gives them
	if text {
		q = last.text
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return sink.or(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if !text { // the statement's own names, as Cells gives them, not the projection's
		names = names[:0]
		for _, c := range last.cols {
			names = append(names, c.name)
		}
	}
	if err == nil {
		err = cols(names)
	}
	if err != nil {
		return err
	}
	return sink.or(scan(rows, len(names), func(vals []any) error {
		for i, v := range vals {
			switch v.(type) {
			case nil, bool, int64, float32, float64, string: // as valueType casts them
				if !text {
					continue
				}
			}
			vals[i] = cell(v)
		}
		return row(vals)
	}))
}

// begin gates query on a connection of db (the caller closes it), writes
// its notes, and returns its last statement with the query that renders
// that statement's result in format (rendered), or "" for a statement
// that runs as written (EXPLAIN, PRAGMA).
func begin(ctx context.Context, db *sql.DB, query, format string, notes io.Writer) (*sql.Conn, statement, string, error) {
	conn, stmts, err := gated(ctx, db, query)
	if err != nil {
		return nil, statement{}, "", err
	}
	last := stmts[len(stmts)-1]
	q, err := rendered(ctx, conn, last, format, len(stmts))
	if err == nil {
		err = noteTicks(ctx, conn, stmts, notes)
	}
	if err != nil {
		conn.Close()
		return nil, statement{}, "", err
	}
	return conn, last, q, nil
}

// runJSON is Run's json format.
func runJSON(ctx context.Context, db *sql.DB, query string, out, notes io.Writer) error {
	ctx, sink := withSink(ctx)
	conn, last, q, err := begin(ctx, db, query, FormatJSON, notes)
	if err != nil {
		return sink.or(err)
	}
	defer conn.Close()
	if q == "" {
		return runRaw(ctx, conn, last.text, out, sink)
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return sink.or(err)
	}
	defer rows.Close()
	// Each record's keys in the order the query selects its columns (a
	// name given twice keeps its first place and its last value, as a
	// JSON object holds one).
	keys := make([]string, 0, len(last.cols))
	at := make([]int, len(last.cols)) // each column's key
	first := map[string]int{}
	for i, c := range last.cols {
		k, ok := first[c.name]
		if !ok {
			k = len(keys)
			first[c.name], keys = k, append(keys, c.name)
		}
		at[i] = k
	}
	records := []orderedRecord{}
	err = scanText(rows, len(last.cols), func(vals []sql.NullString) error {
		rec := orderedRecord{keys: keys, vals: make([]json.RawMessage, len(keys))}
		for i, v := range vals {
			if !v.Valid {
				rec.vals[at[i]] = json.RawMessage("null")
				continue
			}
			b, err := exactJSON(v.String, last.cols[i].info)
			if err != nil {
				return fmt.Errorf("column %s: %w", last.cols[i].name, err)
			}
			rec.vals[at[i]] = b
		}
		records = append(records, rec)
		return nil
	})
	if err != nil {
		return sink.or(err)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(records)
}

// orderedRecord is one row of JSON output: an object whose keys are in
// the query's column order (a Go map's would be sorted).
type orderedRecord struct {
	keys []string
	vals []json.RawMessage
}

func (r orderedRecord) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range r.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(r.vals[i])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// visibleVar is the variable that holds the span of visible ticks the
// views show (Script.Visible), with the world, the run and AtTick; unset
// when it is not known.
const visibleVar = "worldfs_visible"

// noteTicks writes to notes a line for each distinct tick that the
// statements' _at macros name as a constant and that lies outside the
// span of the run's visible ticks the views show: <table>_at(t) of such a
// tick returns no rows, which is not an error (a query may probe), but is
// seldom meant. It reads only what Open stored, never the catalog.
func noteTicks(ctx context.Context, conn *sql.Conn, stmts []statement, notes io.Writer) error {
	if notes == nil {
		return nil
	}
	var ticks []int64
	for _, st := range stmts {
		for _, c := range st.at {
			if !slices.Contains(ticks, c.tick) {
				ticks = append(ticks, c.tick)
			}
		}
	}
	if len(ticks) == 0 {
		return nil
	}
	var world, run sql.NullString
	var first, head, at sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT v.world, v.run, v.first, v.head, v.at FROM (SELECT getvariable('"+visibleVar+"') AS v)").Scan(&world, &run, &first, &head, &at)
	if err != nil || !head.Valid {
		return err // unknown: no notes
	}
	for _, t := range ticks {
		var why string
		switch {
		case head.Int64 < first.Int64:
			why = "it has no visible tick"
		case first.Int64 == head.Int64 && at.Int64 == head.Int64 && first.Int64 > 0:
			why = fmt.Sprintf("the views are pinned to tick %d alone", head.Int64)
		case t < first.Int64:
			why = fmt.Sprintf("its first visible tick is %d", first.Int64)
		case t > head.Int64 && at.Int64 != math.MaxInt64:
			why = fmt.Sprintf("the views are pinned at tick %d, where its head is %d", at.Int64, head.Int64)
		case t > head.Int64:
			why = fmt.Sprintf("head is %d", head.Int64)
		default:
			continue
		}
		if _, err := fmt.Fprintf(notes, "note: tick %d is not a visible tick of run %s of %s (%s)\n", t, run.String, world.String, why); err != nil {
			return err
		}
	}
	return nil
}

// nullString is a table or csv cell: NULL prints as NULL.
func nullString(v sql.NullString) string {
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

// rendered returns the statement that gives st's result (st is the n-th
// statement of its query) with each value rendered by DuckDB for format,
// column by column (by position, so duplicate names keep their order):
//
//	table, csv: FROM (st) SELECT CAST(#1 AS VARCHAR), …
//	json:       FROM (st) SELECT CAST(to_json(CAST(#1 AS T1)) AS VARCHAR), …
//
// where Ti is column i's type with every part JSON has no type for, and
// every integer wider than 32 bits and every float, made VARCHAR
// (jsonType); exactJSON then makes the numbers among them JSON numbers.
// The statement is checked by the gate as a statement of its own
// (projected), so wrapping st cannot make it do anything the gate would
// refuse.
// q is "" for a statement that cannot be a subquery (EXPLAIN, PRAGMA,
// whose results are text, numbers and booleans): it runs as written.
func rendered(ctx context.Context, conn *sql.Conn, st statement, format string, n int) (string, error) {
	if st.keyword == "EXPLAIN" || st.keyword == "PRAGMA" || len(st.cols) == 0 {
		return "", nil
	}
	exprs := make([]string, len(st.cols))
	for i, c := range st.cols {
		if format == formatValues {
			exprs[i] = fmt.Sprintf("CAST(#%d AS %s)", i+1, valueType(c.info))
			continue
		}
		if format == FormatJSON {
			exprs[i] = fmt.Sprintf("CAST(to_json(CAST(#%d AS %s)) AS VARCHAR)", i+1, jsonType(c.info))
		} else {
			exprs[i] = fmt.Sprintf("CAST(#%d AS VARCHAR)", i+1)
		}
	}
	return projected(ctx, conn, st.text, n, exprs)
}

// formatValues is Values' rendering: each value cast to valueType.
const formatValues = "values"

// valueType is the type Values gives a value of info as: BOOLEAN, FLOAT,
// DOUBLE and VARCHAR as they are, every integer of up to 64 bits but
// UBIGINT (whose values one JSON number does not hold) as BIGINT, so the
// driver gives an int64, and every other value as its VARCHAR form.
func valueType(info duckdb.TypeInfo) string {
	if info == nil {
		return "VARCHAR"
	}
	switch info.InternalType() {
	case duckdb.TYPE_BOOLEAN:
		return "BOOLEAN"
	case duckdb.TYPE_FLOAT:
		return "FLOAT"
	case duckdb.TYPE_DOUBLE:
		return "DOUBLE"
	case duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_INTEGER, duckdb.TYPE_BIGINT,
		duckdb.TYPE_UTINYINT, duckdb.TYPE_USMALLINT, duckdb.TYPE_UINTEGER:
		return "BIGINT"
	}
	return "VARCHAR" // a JSON value too: its text, not the driver's parse of it
}

// jsonType is the type a value of info is cast to before to_json: info
// with every leaf that to_json would not write exactly as DuckDB's VARCHAR
// form or a JSON number that doubles hold made VARCHAR. BOOLEAN, integers
// of up to 32 bits, VARCHAR and JSON stay; so do LIST, ARRAY, STRUCT, MAP
// and UNION, around their converted parts.
func jsonType(info duckdb.TypeInfo) string {
	if info == nil {
		return "VARCHAR"
	}
	switch info.InternalType() {
	case duckdb.TYPE_BOOLEAN:
		return "BOOLEAN"
	case duckdb.TYPE_TINYINT:
		return "TINYINT"
	case duckdb.TYPE_SMALLINT:
		return "SMALLINT"
	case duckdb.TYPE_INTEGER:
		return "INTEGER"
	case duckdb.TYPE_UTINYINT:
		return "UTINYINT"
	case duckdb.TYPE_USMALLINT:
		return "USMALLINT"
	case duckdb.TYPE_UINTEGER:
		return "UINTEGER"
	case duckdb.TYPE_VARCHAR:
		if strings.EqualFold(info.Alias(), "JSON") {
			return "JSON"
		}
		return "VARCHAR"
	}
	switch d := info.Details().(type) {
	case *duckdb.ListDetails:
		return jsonType(d.Child) + "[]"
	case *duckdb.ArrayDetails:
		return fmt.Sprintf("%s[%d]", jsonType(d.Child), d.Size)
	case *duckdb.MapDetails:
		return "MAP(" + jsonType(d.Key) + ", " + jsonType(d.Value) + ")"
	case *duckdb.StructDetails:
		parts := make([]string, len(d.Entries))
		for i, e := range d.Entries {
			parts[i] = ident(e.Name()) + " " + jsonType(e.Info())
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")"
	case *duckdb.UnionDetails:
		parts := make([]string, len(d.Members))
		for i, m := range d.Members {
			parts[i] = ident(m.Name) + " " + jsonType(m.Type)
		}
		return "UNION(" + strings.Join(parts, ", ") + ")"
	}
	return "VARCHAR"
}

// maxExact is 2^53: integers beyond it are not all doubles.
var maxExact = big.NewInt(1 << 53)

// exactJSON rewrites text, the to_json of a value cast to jsonType(info),
// as the JSON Run prints: a leaf that jsonType made VARCHAR but that is a
// number (an integer wider than 32 bits within ±2^53, a finite float)
// becomes a JSON number again; every other leaf is as to_json wrote it.
// An object's members keep their order.
func exactJSON(text string, info duckdb.TypeInfo) (json.RawMessage, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var out bytes.Buffer
	if err := transcode(dec, info, &out); err != nil {
		return nil, fmt.Errorf("reading DuckDB's JSON %.80q: %w", text, err)
	}
	return out.Bytes(), nil
}

func transcode(dec *json.Decoder, info duckdb.TypeInfo, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	var details duckdb.TypeDetails
	if info != nil {
		details = info.Details()
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			var child duckdb.TypeInfo
			switch d := details.(type) {
			case *duckdb.ListDetails:
				child = d.Child
			case *duckdb.ArrayDetails:
				child = d.Child
			}
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := transcode(dec, child, out); err != nil {
					return err
				}
			}
			_, err := dec.Token() // ]
			out.WriteByte(']')
			return err
		}
		// An object: a STRUCT (members by name), a MAP (every value of
		// its value type), a UNION (its member by name) or JSON.
		out.WriteByte('{')
		for i := 0; dec.More(); i++ {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			var member duckdb.TypeInfo
			switch d := details.(type) {
			case *duckdb.StructDetails:
				for _, e := range d.Entries {
					if e.Name() == key {
						member = e.Info()
					}
				}
			case *duckdb.MapDetails:
				member = d.Value
			case *duckdb.UnionDetails:
				for _, m := range d.Members {
					if m.Name == key {
						member = m.Type
					}
				}
			}
			if i > 0 {
				out.WriteByte(',')
			}
			kb, _ := json.Marshal(key)
			out.Write(kb)
			out.WriteByte(':')
			if err := transcode(dec, member, out); err != nil {
				return err
			}
		}
		_, err := dec.Token() // }
		out.WriteByte('}')
		return err
	case string:
		if info != nil && isNumber(tok, info.InternalType()) {
			out.WriteString(tok)
			return nil
		}
		b, err := json.Marshal(tok)
		out.Write(b)
		return err
	case json.Number:
		out.WriteString(tok.String())
	case bool:
		out.WriteString(strconv.FormatBool(tok))
	case nil:
		out.WriteString("null")
	}
	return nil
}

// isNumber says whether s, DuckDB's VARCHAR form of a value of type t,
// is a JSON number that a reader parsing numbers as doubles reads as
// exactly that value: an integer within ±2^53, or a finite float (DuckDB
// writes a float's shortest round-trip digits).
func isNumber(s string, t duckdb.Type) bool {
	switch t {
	case duckdb.TYPE_BIGINT, duckdb.TYPE_UBIGINT, duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT, duckdb.TYPE_BIGNUM:
		n, ok := new(big.Int).SetString(s, 10)
		return ok && n.CmpAbs(maxExact) <= 0
	case duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE:
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && json.Valid([]byte(s)) && s[0] != '+'
	}
	return false
}

// runRaw runs one statement that cannot be a subquery and writes its
// result as JSON records, each value as the Go driver types it.
func runRaw(ctx context.Context, conn *sql.Conn, text string, out io.Writer, sink *sink) error {
	rows, err := conn.QueryContext(ctx, text)
	if err != nil {
		return sink.or(err)
	}
	defer rows.Close()
	records, err := records(rows)
	if err != nil {
		return sink.or(err)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(records)
}

// cell is a value of EXPLAIN's or a PRAGMA's result (text, numbers,
// booleans) for table and csv output.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// scanText calls fn with each row's n values as text (fn must not keep
// the slice) and returns the first error of the scan or of fn.
func scanText(rows *sql.Rows, n int, fn func(vals []sql.NullString) error) error {
	vals := make([]sql.NullString, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// records returns rows as records, each value as the Go driver types it
// under its column's name (none nil: no rows is an empty list).
func records(rows *sql.Rows) ([]map[string]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	err = scan(rows, len(cols), func(vals []any) error {
		rec := make(map[string]any, len(cols))
		for i, c := range cols {
			rec[c] = vals[i]
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// scan calls fn with each row's n values (fn must not keep the slice) and
// returns the first error of the scan.
func scan(rows *sql.Rows, n int, fn func(vals []any) error) error {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}
