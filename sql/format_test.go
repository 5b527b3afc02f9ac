package sql_test

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	wsql "github.com/worldfs/worldfs/sql"
)

// typeCase is a value of one DuckDB type, and what --format json prints
// for it: "string" (DuckDB's VARCHAR form, as a JSON string), "number"
// (a JSON number whose text is the VARCHAR form), or the JSON itself.
type typeCase struct{ expr, json string }

var typeMatrix = []typeCase{
	{"NULL", "null"},
	{"TIME_NS '12:00:00.123456789'", "string"},
	{"[TIME_NS '12:00:00.123456789']", `["12:00:00.123456789"]`},
	{"{'a': [1]}::VARIANT", "string"},
	{"['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID]", `["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]`},
	{"{'b': '\\xFF'::BLOB, 'i': INTERVAL 1 HOUR}", `{"b":"\\xFF","i":"01:00:00"}`},
	{"true", "true"},
	{"(-128)::TINYINT", "-128"},
	{"32767::SMALLINT", "32767"},
	{"(-2147483648)::INTEGER", "-2147483648"},
	{"255::UTINYINT", "255"},
	{"65535::USMALLINT", "65535"},
	{"4294967295::UINTEGER", "4294967295"},
	{"(-9007199254740992)::BIGINT", "number"},
	{"9007199254740993::BIGINT", "string"},
	{"18446744073709551615::UBIGINT", "string"},
	{"9007199254740992::HUGEINT", "number"},
	{"(-170141183460469231731687303715884105728)::HUGEINT", "string"},
	{"340282366920938463463374607431768211455::UHUGEINT", "string"},
	{"1.5", "string"}, // DECIMAL(2,1)
	{"1.50::DECIMAL(4,2)", "string"},
	{"(-0.05)::DECIMAL(18,3)", "string"},
	{"123456789012345678901234567.89::DECIMAL(38,2)", "string"},
	{"1.1::FLOAT", "number"},
	{"0.1::DOUBLE", "number"},
	{"1e20::DOUBLE", "number"},
	{"1e-7::DOUBLE", "number"},
	{"(-0.0)::DOUBLE", "number"},
	{"'NaN'::DOUBLE", "string"},
	{"'inf'::DOUBLE", "string"},
	{"'-inf'::FLOAT", "string"},
	{"'a,b \"q\" é'", "string"},
	{"''", "string"},
	{"'{\"a\": [1, 12345678901234567891]}'::JSON", `{"a":[1,12345678901234567891]}`},
	{"INTERVAL 1 YEAR + INTERVAL 2 MONTH + INTERVAL 3 DAY + '04:05:06.000007'::INTERVAL", "string"},
	{"INTERVAL (-36) HOUR", "string"},
	{"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID", "string"},
	{"'\\xAA\\x00ab\\x5Cc'''::BLOB", "string"},
	{"DATE '2024-02-29'", "string"},
	{"DATE '-0044-03-15'", "string"},
	{"'infinity'::DATE", "string"},
	{"TIME '23:59:59.123456'", "string"},
	{"TIMETZ '12:34:56.5+05:30'", "string"},
	{"TIMESTAMP_S '2024-01-02 03:04:05'", "string"},
	{"TIMESTAMP_MS '2024-01-02 03:04:05.678'", "string"},
	{"TIMESTAMP '2024-01-02 03:04:05.678901'", "string"},
	{"TIMESTAMP_NS '2024-01-02 03:04:05.678901234'", "string"},
	{"TIMESTAMPTZ '2024-01-02 03:04:05.6+02'", "string"},
	{"'b'::ENUM('a', 'b')", "string"},
	{"'0101100'::BIT", "string"},
	{"123456789012345678901234567890::BIGNUM", "string"},
	{"42::BIGNUM", "number"},
	{"[1.5, NULL, 2.25]", `["1.50",null,"2.25"]`},
	{"[]::INTEGER[]", `[]`},
	{"[[1, 2], [3]]", `[[1,2],[3]]`},
	{"[9007199254740993, 1]::BIGINT[]", `["9007199254740993",1]`},
	{"['NaN'::DOUBLE, 0.5::DOUBLE]", `["nan",0.5]`},
	{"[1, 2, 3]::INTEGER[3]", `[1,2,3]`},
	{"[DATE '2024-01-01']::DATE[1]", `["2024-01-01"]`},
	{"{'z': 1, 'a': 2.5, 'm': 'x', 'n': NULL::INT}", `{"z":1,"a":"2.5","m":"x","n":null}`},
	{"{'h': 170141183460469231731687303715884105727::HUGEINT, 's': {'t': TIMESTAMP '2024-01-01 00:00:00', 'b': true}}", `{"h":"170141183460469231731687303715884105727","s":{"t":"2024-01-01 00:00:00","b":true}}`},
	{"{'odd \"name\"': 1}", `{"odd \"name\"":1}`},
	{"MAP {'k': 1.5, 'j': 2.5}", `{"k":"1.5","j":"2.5"}`},
	{"MAP {1: [2], 3: []}", `{"1":[2],"3":[]}`},
	{"MAP {DATE '2024-01-01': 5::UBIGINT}", `{"2024-01-01":5}`},
	{"union_value(n := 7)::UNION(n INTEGER, s VARCHAR)", `{"n":7}`},
	{"union_value(d := 1.5)::UNION(d DECIMAL(2,1), s VARCHAR)", `{"d":"1.5"}`},
	{"[union_value(s := 'x')::UNION(n BIGINT, s VARCHAR)]", `[{"s":"x"}]`},
	{"{'l': ['b'::ENUM('a', 'b')], 'u': '0101'::BIT, 'i': INTERVAL 1 DAY}", `{"l":["b"],"u":"0101","i":"1 day"}`},
}

// run is wsql.Run of q on db in format.
func runFormat(t *testing.T, db *sql.DB, q, format string) string {
	t.Helper()
	var out bytes.Buffer
	if err := wsql.Run(ctxT(t), db, q, format, &out, nil); err != nil {
		t.Fatalf("%s (%s): %v", q, format, err)
	}
	return out.String()
}

// Every DuckDB type prints in table and csv output exactly as DuckDB's
// own CAST(value AS VARCHAR) gives it in the same database (TIMESTAMPTZ
// in its TimeZone), NULL as NULL; and in json output as a JSON number
// only where a reader that parses numbers as doubles gets the value
// exactly, as a string of its VARCHAR form where not (DECIMAL always),
// nested values as JSON (their parts by the same rules), JSON as itself.
func TestSQLPrintsEveryTypeAsDuckDBDoes(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	for _, c := range typeMatrix {
		q := "SELECT " + c.expr + " AS v"
		var want sql.NullString
		if err := db.QueryRowContext(ctxT(t), "SELECT CAST(("+c.expr+") AS VARCHAR)").Scan(&want); err != nil {
			t.Fatalf("%s: DuckDB's VARCHAR form: %v", c.expr, err)
		}
		w := want.String
		if !want.Valid {
			w = "NULL"
		}
		recs, err := csv.NewReader(strings.NewReader(runFormat(t, db, q, wsql.FormatCSV))).ReadAll()
		if err != nil || len(recs) != 2 || len(recs[1]) != 1 || recs[0][0] != "v" {
			t.Fatalf("%s: csv %q %v", c.expr, recs, err)
		}
		if recs[1][0] != w {
			t.Errorf("%s: csv prints %q, DuckDB %q", c.expr, recs[1][0], w)
		}
		if got := runFormat(t, db, q, wsql.FormatTable); got != "v\n"+w+"\n" {
			t.Errorf("%s: table prints %q, DuckDB %q", c.expr, got, w)
		}
		var recsJ []map[string]json.RawMessage
		out := runFormat(t, db, q, wsql.FormatJSON)
		if err := json.Unmarshal([]byte(out), &recsJ); err != nil || len(recsJ) != 1 {
			t.Fatalf("%s: json %q %v", c.expr, out, err)
		}
		var compact bytes.Buffer
		json.Compact(&compact, recsJ[0]["v"])
		wantJ := c.json
		switch c.json {
		case "string":
			b, _ := json.Marshal(w)
			wantJ = string(b)
		case "number":
			wantJ = w
			if f, err := strconv.ParseFloat(w, 64); err != nil || !json.Valid([]byte(w)) {
				t.Fatalf("%s: %q is no JSON number (%v)", c.expr, w, err)
			} else if _, err := strconv.ParseInt(w, 10, 64); err == nil && (f > 1<<53 || f < -(1<<53)) {
				t.Fatalf("%s: %q is beyond 2^53", c.expr, w)
			}
		}
		if compact.String() != wantJ {
			t.Errorf("%s: json prints %s, want %s", c.expr, compact.String(), wantJ)
		}
		// Values: a bool, a number of at most 64 bits (UBIGINT aside) or a
		// VARCHAR as the driver types it, reading as the VARCHAR form;
		// every other value as that form.
		var got []any
		err = wsql.Values(ctxT(t), db, q, nil, func(names []string) error {
			if len(names) != 1 || names[0] != "v" {
				t.Errorf("%s: Values names the column %q, not v", c.expr, names)
			}
			return nil
		}, func(vals []any) error {
			got = append(got, vals...)
			return nil
		})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: Values %v %v", c.expr, got, err)
		}
		if typed := typedCases[c.expr]; !readsAs(got[0], w) || typed != (got[0] != nil && fmt.Sprintf("%T", got[0]) != "string") && c.expr != "NULL" {
			t.Errorf("%s: Values gives %#v (%T), DuckDB %q (typed: %v)", c.expr, got[0], got[0], w, typed)
		}
	}
}

// typedCases are the cases of typeMatrix that Values gives typed, not as
// text.
var typedCases = map[string]bool{
	"true": true, "(-128)::TINYINT": true, "32767::SMALLINT": true, "(-2147483648)::INTEGER": true, "255::UTINYINT": true,
	"65535::USMALLINT": true, "4294967295::UINTEGER": true, "(-9007199254740992)::BIGINT": true, "9007199254740993::BIGINT": true,
	"1.1::FLOAT": true, "0.1::DOUBLE": true, "1e20::DOUBLE": true, "1e-7::DOUBLE": true, "(-0.0)::DOUBLE": true,
	"'NaN'::DOUBLE": true, "'inf'::DOUBLE": true, "'-inf'::FLOAT": true,
}

// readsAs reports whether v, a value Values gives, is the value whose
// VARCHAR form is w.
func readsAs(v any, w string) bool {
	switch x := v.(type) {
	case nil:
		return w == "NULL"
	case string:
		return x == w
	case bool:
		return strconv.FormatBool(x) == w
	case float64:
		f, err := strconv.ParseFloat(w, 64)
		return err == nil && (f == x || math.IsNaN(f) && math.IsNaN(x)) && math.Signbit(f) == math.Signbit(x)
	case float32:
		f, err := strconv.ParseFloat(w, 32)
		return err == nil && (float32(f) == x || math.IsNaN(f) && math.IsNaN(float64(x)))
	}
	return fmt.Sprint(v) == w // the integers
}

// A result of several columns keeps their order and names (a name given
// twice too) and the order of its rows; SUMMARIZE's DECIMAL column prints
// as DuckDB prints it.
func TestSQLPrintsColumnsAndRowsInOrder(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	if got := runFormat(t, db, "SELECT 1.5 AS a, 'x' AS a, 2 AS b", wsql.FormatCSV); got != "a,a,b\n1.5,x,2\n" {
		t.Errorf("duplicate names: %q", got)
	}
	if got := runFormat(t, db, "SELECT 1 AS x, 2 AS X, 3 AS x_1, 4 AS y_2", wsql.FormatCSV); got != "x,X,x_1,y_2\n1,2,3,4\n" {
		t.Errorf("names alike: %q", got)
	}
	// Values names its columns as Cells does, whether a column comes typed
	// or as text.
	var names []string
	err := wsql.Values(ctxT(t), db, "SELECT 1.5 AS a, 'x' AS a, 2 AS b, 2.5::DECIMAL(4,1) AS d", nil, func(n []string) error {
		names = n
		return nil
	}, func([]any) error { return nil })
	if err != nil || !reflect.DeepEqual(names, []string{"a", "a", "b", "d"}) {
		t.Errorf("Values names %q (%v), want a, a, b, d", names, err)
	}
	q := "SELECT (i * 7919) % 100003 AS k FROM range(100003) t(i) ORDER BY k DESC"
	recs, err := csv.NewReader(strings.NewReader(runFormat(t, db, q, wsql.FormatCSV))).ReadAll()
	if err != nil || len(recs) != 100004 {
		t.Fatalf("%d rows, %v", len(recs), err)
	}
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(100002-i) {
			t.Fatalf("row %d is %s, want %d", i, r[0], 100002-i)
		}
	}
	want, err := column(db, "SELECT column_name || ',' || CAST(null_percentage AS VARCHAR) FROM (SUMMARIZE particle)")
	if err != nil || len(want) == 0 {
		t.Fatal(want, err)
	}
	got := runFormat(t, db, "SELECT column_name, null_percentage FROM (SUMMARIZE particle)", wsql.FormatCSV)
	if got != "column_name,null_percentage\n"+strings.Join(want, "\n")+"\n" {
		t.Errorf("SUMMARIZE prints %q, want %q", got, want)
	}
	summary := runFormat(t, db, "SUMMARIZE particle", wsql.FormatTable)
	if strings.Contains(summary, "Width") || !strings.Contains(summary, want[0][strings.IndexByte(want[0], ',')+1:]) {
		t.Errorf("SUMMARIZE prints\n%s", summary)
	}
}

// column returns the one column of q's rows, as text.
func column(db *sql.DB, q string) ([]string, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// A query whose <table>_at(t) names a tick outside the run's visible
// ticks gets a note (its result is unchanged: no rows); a visible tick,
// or a tick that is not a constant, gets none.
func TestSQLNotesATickThatIsNotVisible(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	notes := func(q string) (string, string) {
		var out, notes bytes.Buffer
		if err := wsql.Run(ctxT(t), db, q, wsql.FormatCSV, &out, &notes); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out.String(), notes.String()
	}
	for q, want := range map[string]string{
		"SELECT count(*) AS n FROM particle_at(999)": "note: tick 999 is not a visible tick of run main of w (head is 6)\n",
		"SELECT count(*) AS n FROM particle_at(-1)":  "note: tick -1 is not a visible tick of run main of w (its first visible tick is 0)\n",
		"SELECT count(*) AS n FROM particle_at(-5) UNION ALL SELECT count(*) FROM particle_at(9223372036854775807) UNION ALL SELECT count(*) FROM particle_at(-5)": "note: tick -5 is not a visible tick of run main of w (its first visible tick is 0)\n" +
			"note: tick 9223372036854775807 is not a visible tick of run main of w (head is 6)\n",
		"SELECT count(*) AS n FROM particle_at(0) UNION ALL SELECT count(*) FROM particle_at(6)": "",
		"SELECT count(*) AS n FROM particle_at(900 + 99)":                                        "",
	} {
		out, got := notes(q)
		if got != want {
			t.Errorf("%s: notes %q, want %q", q, got, want)
		}
		if want != "" && !strings.HasPrefix(out, "n\n0\n") {
			t.Errorf("%s: %q", q, out)
		}
	}
}

// An error DuckDB raises while the result is rendered names the line of
// the user's query it is on.
func TestSQLRenderingKeepsTheQuerysLines(t *testing.T) {
	rw := newROWorld(t)
	_, db := rw.open(t)
	var out bytes.Buffer
	err := wsql.Run(ctxT(t), db, "SELECT 1 AS a,\n  CAST(v AS INT) AS b FROM (VALUES ('x')) t(v)", wsql.FormatCSV, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "LINE 2:   CAST(v AS INT)") {
		t.Fatalf("%v", err)
	}
}
