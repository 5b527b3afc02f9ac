package serve_test

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/worldfs/worldfs/engine/enginetest"
)

func TestMain(m *testing.M) {
	// DuckDB writes TIMESTAMPTZ values in its time zone, which it takes
	// from TZ; clients convert them to theirs (pandas to UTC).
	os.Setenv("TZ", "UTC")
	os.Exit(m.Run())
}

// clientQuery is a query every client runs, and what worldfs sql prints
// for it.
type clientQuery struct {
	name, world, text string
	// param, if set, is the query again with $1 (?, %s) for this value:
	// the same result, through parameters.
	param *int64
}

func clientQueries() []clientQuery {
	five := int64(5)
	return []clientQuery{
		{name: "one tick", world: "w", text: "SELECT * FROM particle_at(5) ORDER BY entity_id", param: &five},
		{name: "a diff", world: "w", text: "SELECT * FROM particle_diff(3, 6) ORDER BY entity_id, change_type"},
		{name: "a whole table", world: "w", text: "SELECT * FROM particle ORDER BY tick, entity_id"},
		{name: "every type", world: "typed", text: `SELECT s.*, entity_id::SMALLINT AS i2, sum(s_count) OVER () AS total,
  12.50::DECIMAL(10,2) AS price, DATE '2026-01-02' AS day, '\xAA\x00z'::BLOB AS raw,
  [entity_id, NULL, 3]::BIGINT[] AS ids, ['a', NULL, 'c d'] AS words, [s_mass, 2.5] AS masses,
  [s_alive, NOT s_alive] AS flags, '{"a": [1, 2]}'::JSON AS doc, {'k': s_kind} AS rec,
  'inf'::DOUBLE AS big, NULL::VARCHAR AS nothing
FROM sample_at(1) s ORDER BY entity_id`},
		{name: "the ticks", world: "typed", text: "SELECT tick, published_at, commit_token, writer_epoch, tables FROM worldfs_ticks ORDER BY tick"},
	}
}

// withParam is q's text with its constant tick as the first parameter,
// written as a client writes one (marker: $1 or %s).
func (q clientQuery) withParam(marker string) string {
	return strings.Replace(q.text, "particle_at(5)", "particle_at("+marker+")", 1)
}

// TestClientsGetWhatWorldfsSQLPrints runs the same queries through psql,
// pandas.read_sql over psycopg2, node-postgres and pgx, and finds in each
// exactly what worldfs sql --format csv prints: the same columns, and
// each value as DuckDB writes it (the clients' own forms of booleans,
// floats' infinities, bytea and arrays read back as DuckDB writes them).
func TestClientsGetWhatWorldfsSQLPrints(t *testing.T) {
	f := newFixture(t, nil)
	queries := clientQueries()
	want := map[string][][]string{}
	for _, q := range queries {
		want[q.name] = parseCSV(t, f.reference(t, q.world, q.text, nil))
		if len(want[q.name]) < 3 {
			t.Fatalf("%s: worldfs sql prints %d lines; the test proves little", q.name, len(want[q.name]))
		}
	}
	// The types every client reads: pgx's descriptions of each query.
	oids := map[string][]uint32{}
	for _, q := range queries {
		c := f.connect(t, q.world)
		rows, err := c.Query(enginetest.Context(t), q.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range rows.FieldDescriptions() {
			oids[q.name] = append(oids[q.name], fd.DataTypeOID)
		}
		rows.Close()
	}
	wantTypes := []uint32{pgtype.Int8OID, pgtype.Int8OID, pgtype.Float8OID, pgtype.Float4OID, pgtype.Int8OID, pgtype.Int4OID,
		pgtype.BoolOID, pgtype.TextOID, pgtype.Int2OID, pgtype.NumericOID, pgtype.NumericOID, pgtype.DateOID, pgtype.ByteaOID,
		pgtype.Int8ArrayOID, pgtype.TextArrayOID, pgtype.Float8ArrayOID, pgtype.BoolArrayOID, pgtype.JSONOID, pgtype.TextOID,
		pgtype.Float8OID, pgtype.TextOID}
	if got := oids["every type"]; !reflect.DeepEqual(got, wantTypes) {
		t.Errorf("every type: the column types are %v, want %v", got, wantTypes)
	}
	if got := oids["the ticks"]; len(got) != 5 || got[1] != pgtype.TimestamptzOID {
		t.Errorf("the ticks: the column types are %v, want published_at timestamptz", got)
	}

	t.Run("psql", func(t *testing.T) {
		psql := tool(t, "psql")
		host, port, _ := net.SplitHostPort(f.addr)
		for _, q := range queries {
			cmd := exec.Command(psql, "-X", "--csv", "-P", "null=NULL", "-h", host, "-p", port, "-U", "anyone", "-d", q.world, "-c", q.text)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: psql: %v\n%s", q.name, err, stderr.String())
			}
			got := parseCSV(t, string(out))
			compare(t, "psql: "+q.name, fromPGText(got, oids[q.name]), want[q.name])
		}
	})

	t.Run("pandas", func(t *testing.T) {
		py := python(t)
		type pyQuery struct {
			Text   string `json:"text"`
			Params []any  `json:"params,omitempty"`
		}
		var job struct {
			DSN     string    `json:"dsn"`
			Queries []pyQuery `json:"queries"`
		}
		var names []string
		for _, q := range queries {
			job.Queries = append(job.Queries, pyQuery{Text: q.text})
			names = append(names, q.name)
			if q.param != nil {
				job.Queries = append(job.Queries, pyQuery{Text: q.withParam("%s"), Params: []any{*q.param}})
				names = append(names, q.name)
			}
		}
		outs := runJob(t, py, "testdata/read_sql.py", "", job, len(job.Queries), f, "dsn")
		for i, o := range outs {
			var res struct {
				Columns []string    `json:"columns"`
				Rows    [][]*string `json:"rows"`
				Error   string      `json:"error"`
			}
			if err := json.Unmarshal(o, &res); err != nil || res.Error != "" {
				t.Fatalf("pandas: %s: %v %s", names[i], err, res.Error)
			}
			compare(t, "pandas: "+names[i], withHeader(res.Columns, res.Rows), want[names[i]])
		}
	})

	t.Run("node-postgres", func(t *testing.T) {
		dir := nodePG(t)
		type nodeQuery struct {
			Text   string `json:"text"`
			Values []any  `json:"values,omitempty"`
		}
		var job struct {
			Connection map[string]any `json:"connection"`
			Queries    []nodeQuery    `json:"queries"`
		}
		var names []string
		for _, q := range queries {
			job.Queries = append(job.Queries, nodeQuery{Text: q.text})
			names = append(names, q.name)
			if q.param != nil {
				job.Queries = append(job.Queries, nodeQuery{Text: q.withParam("$1"), Values: []any{*q.param}})
				names = append(names, q.name)
			}
		}
		outs := runJob(t, tool(t, "node"), filepath.Join(dir, "query.js"), dir, job, len(job.Queries), f, "connection")
		for i, o := range outs {
			var res struct {
				Fields [][2]any    `json:"fields"`
				Rows   [][]*string `json:"rows"`
				Error  string      `json:"error"`
			}
			if err := json.Unmarshal(o, &res); err != nil || res.Error != "" {
				t.Fatalf("node-postgres: %s: %v %s", names[i], err, res.Error)
			}
			var cols []string
			var types []uint32
			for _, fd := range res.Fields {
				cols = append(cols, fd[0].(string))
				types = append(types, uint32(fd[1].(float64)))
			}
			compare(t, "node-postgres: "+names[i], fromPGText(withHeader(cols, res.Rows), types), want[names[i]])
		}
	})

	t.Run("pgx", func(t *testing.T) {
		ctx := enginetest.Context(t)
		for _, q := range queries {
			c := f.connect(t, q.world)
			texts := []string{q.text}
			var args [][]any
			args = append(args, nil)
			if q.param != nil {
				texts = append(texts, q.withParam("$1"))
				args = append(args, []any{*q.param})
			}
			for i, text := range texts {
				rows, err := c.Query(ctx, text, args[i]...)
				if err != nil {
					t.Fatal(err)
				}
				got := [][]string{}
				var head []string
				for _, fd := range rows.FieldDescriptions() {
					head = append(head, fd.Name)
				}
				got = append(got, head)
				for rows.Next() {
					vals, err := rows.Values()
					if err != nil {
						t.Fatal(err)
					}
					raw := rows.RawValues()
					row := make([]string, len(vals))
					for j, v := range vals {
						if rows.FieldDescriptions()[j].DataTypeOID == pgtype.JSONOID && raw[j] != nil {
							row[j] = string(raw[j]) // as the server sent it, not parsed
							continue
						}
						row[j] = duckText(t, v)
					}
					got = append(got, row)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				compare(t, "pgx: "+q.name, got, want[q.name])
			}
		}
	})
}

// runJob runs script (with interpreter) in dir on job, with the
// connection named by key set to f's, and returns its n results.
func runJob(t *testing.T, interpreter, script, dir string, job any, n int, f *fixture, key string) []json.RawMessage {
	t.Helper()
	host, port, _ := net.SplitHostPort(f.addr)
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	// Every query of a job is of one world at a time: split by world.
	var outs []json.RawMessage
	queries := m["queries"].([]any)
	worlds := worldsOf(n)
	for _, world := range []string{"w", "typed"} {
		var sub []any
		for i, q := range queries {
			if worlds[i] == world {
				sub = append(sub, q)
			}
		}
		if len(sub) == 0 {
			continue
		}
		m["queries"] = sub
		if key == "dsn" {
			m[key] = fmt.Sprintf("host=%s port=%s user=anyone dbname=%s sslmode=disable", host, port, world)
		} else {
			p, _ := strconv.Atoi(port)
			m[key] = map[string]any{"host": host, "port": p, "user": "anyone", "database": world}
		}
		in, _ := json.Marshal(m)
		cmd := exec.Command(interpreter, script)
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", interpreter, script, err, stderr.String())
		}
		var res []json.RawMessage
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
		outs = append(outs, res...)
	}
	if len(outs) != n {
		t.Fatalf("%s answered %d queries of %d", script, len(outs), n)
	}
	return outs
}

// worldsOf is the world of each of the n queries of a job as the
// clients' tests build it from clientQueries (a query with a parameter
// twice), in order.
func worldsOf(n int) []string {
	var out []string
	for _, q := range clientQueries() {
		out = append(out, q.world)
		if q.param != nil {
			out = append(out, q.world)
		}
	}
	return out[:min(n, len(out))]
}

func parseCSV(t *testing.T, text string) [][]string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("reading CSV: %v\n%s", err, text)
	}
	return recs
}

// withHeader is rows under the header cols, NULL as worldfs sql prints
// it.
func withHeader(cols []string, rows [][]*string) [][]string {
	out := [][]string{cols}
	for _, r := range rows {
		row := make([]string, len(r))
		for i, v := range r {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = *v
			}
		}
		out = append(out, row)
	}
	return out
}

// compare fails the test where got and want differ, naming the first
// difference.
func compare(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := range max(len(got), len(want)) {
		var g, w []string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %d lines, worldfs sql %d; line %d is\n  %q\nwhere worldfs sql prints\n  %q", what, len(got), len(want), i+1, g, w)
			return
		}
	}
}

// fromPGText is rows of PostgreSQL's text forms (psql, node-postgres) of
// columns of types oids, each value as DuckDB writes it.
func fromPGText(rows [][]string, oids []uint32) [][]string {
	out := [][]string{rows[0]}
	for _, r := range rows[1:] {
		row := make([]string, len(r))
		for i, v := range r {
			row[i] = v
			if v != "NULL" && i < len(oids) {
				row[i] = duckOfPG(oids[i], v)
			}
		}
		out = append(out, row)
	}
	return out
}

// arrayElems are the element types of the array types the server sends.
var arrayElems = map[uint32]uint32{
	pgtype.BoolArrayOID: pgtype.BoolOID, pgtype.Int2ArrayOID: pgtype.Int2OID, pgtype.Int4ArrayOID: pgtype.Int4OID,
	pgtype.Int8ArrayOID: pgtype.Int8OID, pgtype.TextArrayOID: pgtype.TextOID, pgtype.Float4ArrayOID: pgtype.Float4OID,
	pgtype.Float8ArrayOID: pgtype.Float8OID, pgtype.NumericArrayOID: pgtype.NumericOID,
}

// duckOfPG is v, PostgreSQL's text of a value of type oid, as DuckDB
// writes the value.
func duckOfPG(oid uint32, v string) string {
	switch oid {
	case pgtype.BoolOID:
		return map[string]string{"t": "true", "f": "false"}[v]
	case pgtype.Float4OID, pgtype.Float8OID:
		switch v {
		case "Infinity":
			return "inf"
		case "-Infinity":
			return "-inf"
		case "NaN":
			return "nan"
		}
	case pgtype.ByteaOID:
		b, err := hex.DecodeString(strings.TrimPrefix(v, `\x`))
		if err != nil {
			return "bad bytea " + v
		}
		return blobText(b)
	}
	if elem, ok := arrayElems[oid]; ok {
		var parts []string
		for _, e := range parseArray(v) {
			if e == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, duckOfPG(elem, *e))
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return v
}

// parseArray reads a one-dimensional PostgreSQL array literal.
func parseArray(s string) []*string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	var out []*string
	for i := 0; i < len(s); {
		var b strings.Builder
		quoted := s[i] == '"'
		if quoted {
			i++
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' {
					i++
				}
				b.WriteByte(s[i])
				i++
			}
			i++
		} else {
			for i < len(s) && s[i] != ',' {
				b.WriteByte(s[i])
				i++
			}
		}
		e := b.String()
		if !quoted && e == "NULL" {
			out = append(out, nil)
		} else {
			out = append(out, &e)
		}
		i++ // the comma
	}
	return out
}

// blobText is DuckDB's text of a BLOB.
func blobText(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c >= 32 && c < 127 && c != '\\' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, `\x%02X`, c)
		}
	}
	return sb.String()
}

// duckText is v, a value pgx decoded, as DuckDB writes it.
func duckText(t *testing.T, v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(x)
	case int16, int32, int64:
		return fmt.Sprint(x)
	case float32:
		return floatText(float64(x), 32)
	case float64:
		return floatText(x, 64)
	case string:
		return x
	case []byte:
		return blobText(x)
	case pgtype.Numeric:
		return numericText(x)
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 && x.Location() == time.UTC {
			return x.Format("2006-01-02") // a date
		}
		s := x.Format("2006-01-02 15:04:05.999999")
		_, off := x.Zone()
		return s + fmt.Sprintf("%+03d", off/3600)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = duckText(t, e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	t.Fatalf("pgx gave a %T (%v): no DuckDB text for it", v, v)
	return ""
}

// floatText writes f as DuckDB (and Python's repr) do: its shortest
// digits, in positional notation from 1e-4 up to 1e16 (with .0 on an
// integer), else in scientific notation with an exponent of at least two
// digits.
func floatText(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, bits) // d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		return fmt.Sprintf("%se%+03d", mant, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// numericText writes n with its scale, as DuckDB writes a DECIMAL.
func numericText(n pgtype.Numeric) string {
	if !n.Valid {
		return "NULL"
	}
	digits := new(big.Int).Abs(n.Int).String()
	sign := ""
	if n.Int.Sign() < 0 {
		sign = "-"
	}
	if n.Exp >= 0 {
		return sign + digits + strings.Repeat("0", int(n.Exp))
	}
	scale := int(-n.Exp)
	for len(digits) <= scale {
		digits = "0" + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}
