package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// The statement gate: user SQL runs only if every statement of it reads.
// DuckDB's allowed directories (readonly.go) also admit writes, so a COPY
// over a fragment, or into the catalog, must never start; and DuckDB does
// work when it merely parses or prepares some statements (EXPORT DATABASE
// creates its directory when prepared, PRAGMA import_database reads files
// when parsed), so the gate decides on the text before DuckDB sees it:
//
//  1. The query is split into statements (split), and each statement's
//     first keyword must be one that begins only reading statements
//     (readKeywords); a PRAGMA must be one that only reads (readPragmas);
//     EXPLAIN must explain such a statement. Only the text is read.
//  2. DuckDB's parser (in a database of its own with no file access)
//     must count exactly one statement in each: a piece is never two
//     statements, whose first would run while the second is prepared.
//  3. It reads files only through the views (reads, below), decided on
//     DuckDB's parse tree before it is prepared: binding a read_parquet
//     or a file named as a table already opens the file.
//  4. Prepared (which, for one statement, runs nothing; a query as the
//     subquery of FROM (…) LIMIT 0, see described), DuckDB must type it
//     SELECT (EXPLAIN: the explained statement, prepared by itself, must
//     be a SELECT): WITH … INSERT, say, passes 1 and fails here.
//
// The whole query is checked before any statement of it runs, and the
// parser's count of the whole must match the pieces'.

// ErrNotReadOnly: a statement that does not only read, refused by the
// gate. (index.ErrRefused is another refusal: a catalog entry the log
// refuses.)
var ErrNotReadOnly = errors.New("refused: worldfs sql only reads")

// refused is an error that is ErrNotReadOnly, with its own message.
type refused string

func (e refused) Error() string        { return string(e) }
func (e refused) Is(target error) bool { return target == ErrNotReadOnly }

func refusedf(format string, args ...any) error { return refused(fmt.Sprintf(format, args...)) }

// readKeywords begin a statement that, prepared as a SELECT, only reads.
var readKeywords = map[string]bool{
	"SELECT": true, "WITH": true, "FROM": true, "VALUES": true, "TABLE": true, "(": true,
	"DESCRIBE": true, "SHOW": true, "SUMMARIZE": true,
	"PIVOT": true, "UNPIVOT": true, "PIVOT_WIDER": true, "PIVOT_LONGER": true,
}

// readPragmas are the PRAGMAs that DuckDB rewrites to a query of the
// catalog (and that read no files when they are rewritten).
var readPragmas = map[string]bool{
	"table_info": true, "show": true, "show_tables": true, "show_tables_expanded": true, "show_databases": true,
	"database_list": true, "database_size": true, "storage_info": true, "metadata_info": true,
	"version": true, "platform": true, "user_agent": true, "functions": true, "collations": true,
}

// Allowed says, for refusals, what runs.
const Allowed = "worldfs sql only reads: it runs SELECT (and WITH, FROM, VALUES, TABLE, PIVOT, UNPIVOT), DESCRIBE, SHOW, SUMMARIZE, " +
	"EXPLAIN [ANALYZE] of those, and the PRAGMAs that only read (table_info, show_tables, database_list, version, …); " +
	"it never writes files (COPY, EXPORT), attaches databases, installs or loads extensions, changes settings or defines objects. " +
	"To write a result to a file, give worldfs sql --out FILE (.csv, .json, .jsonl or .parquet)"

// statement is one checked statement of a query.
type statement struct {
	text    string
	keyword string      // its first keyword, upper case
	cols    []resultCol // its result's columns, as prepared
	at      []atCall    // the views' _at macros it calls with a constant tick
}

// atCall is a call of a view's _at macro with a constant tick.
type atCall struct {
	macro string
	tick  int64
}

// gated checks query on a connection of db (gate), and refuses a query of
// several statements (ErrSeveralStatements): each would have a result,
// and a run prints one (a CSV, a JSON document, a file of --out, a table
// of the web interface). It returns the connection (the caller closes
// it) and the statement, for the caller to run its own way.
func gated(ctx context.Context, db *sql.DB, query string) (*sql.Conn, []statement, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	stmts, err := gate(ctx, conn, query)
	if err == nil && len(stmts) > 1 {
		err = fmt.Errorf("%w: this query holds %d (1: %s; 2: %s): run each as a query of its own, or make them one (UNION ALL BY NAME, a WITH, a subquery)",
			ErrSeveralStatements, len(stmts), abbrev(stmts[0].text), abbrev(stmts[1].text))
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, stmts, nil
}

// ErrSeveralStatements: a query to run holds more than one statement,
// whose results would not fit the one result a run prints. Nothing ran.
var ErrSeveralStatements = errors.New("one statement at a time: a query prints one result")

// gate splits query into its statements and checks each (see above) on
// conn, which holds the views. It returns them in order, or an error
// that names the first statement refused.
func gate(ctx context.Context, conn *sql.Conn, query string) ([]statement, error) {
	pieces := split(query)
	var out []statement
	total := 0
	var texts []string
	for _, p := range pieces {
		if skipSpace(p, 0) == len(p) {
			continue // blank or only comments
		}
		if err := checkKeyword(p, len(texts)+1); err != nil {
			// Not SQL at all: say so. (The parser has no file access.)
			if _, perr := countStatements(p); perr != nil && strings.HasPrefix(perr.Error(), "Parser Error") {
				return nil, perr
			}
			return nil, err
		}
		texts = append(texts, p)
	}
	for i, p := range texts {
		n, err := countStatements(p)
		if err != nil {
			return nil, err
		}
		total += n
		if kw, _ := firstWord(p); n != 1 && (kw == "PIVOT" || kw == "PIVOT_WIDER") {
			return nil, refusedf("statement %d (%s) is refused: without an IN list DuckDB runs a PIVOT as two statements, the first creating a type; name the values: PIVOT … ON column IN (value, …) USING …", i+1, abbrev(p))
		}
		if n != 1 {
			return nil, refusedf("statement %d (%s) is refused: its statements could not be told apart; give them one by one", i+1, abbrev(p))
		}
		st, err := check(ctx, conn, p, i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, errors.New("no statement to run")
	}
	if all, err := countStatements(query); err != nil || all != total {
		return nil, refusedf("the query is refused: its statements could not be told apart (%d pieces, DuckDB counts %d); give them one by one", total, all)
	}
	return out, nil
}

func refusal(text string, n int, what string) error {
	return refusedf("statement %d (%s) is refused: %s. %s", n, abbrev(text), what, Allowed)
}

// checkKeyword applies rule 1 to text, the n-th statement of its query.
func checkKeyword(text string, n int) error {
	kw, rest := firstWord(text)
	switch {
	case kw == "PRAGMA":
		if name, _ := firstWord(rest); !readPragmas[strings.ToLower(name)] {
			return refusal(text, n, "PRAGMA "+strings.ToLower(name)+" does not only read")
		}
	case kw == "EXPLAIN":
		inner, ok := explained(rest)
		if !ok {
			return refusal(text, n, "EXPLAIN must explain a query that only reads")
		}
		if ikw, _ := firstWord(inner); !readKeywords[ikw] {
			return refusal(text, n, "EXPLAIN must explain a query that only reads, not "+ikw)
		}
	case !readKeywords[kw]:
		if kw == "" {
			kw = "this"
		}
		return refusal(text, n, kw+" statements are not run")
	}
	return nil
}

// check applies rules 3 and 4 to the single statement text (rule 2),
// the n-th of its query, which passed rule 1.
func check(ctx context.Context, conn *sql.Conn, text string, n int) (statement, error) {
	kw, rest := firstWord(text)
	want := duckdb.STATEMENT_TYPE_SELECT
	var at []atCall
	if kw != "EXPLAIN" && kw != "PRAGMA" { // a read PRAGMA reads the catalog only
		var err error
		if at, err = reads(ctx, conn, text, text, n); err != nil {
			return statement{}, err
		}
	}
	if kw == "EXPLAIN" {
		want = duckdb.STATEMENT_TYPE_EXPLAIN
		inner, _ := explained(rest)
		if m, err := countStatements(inner); err != nil || m != 1 {
			return statement{}, refusal(text, n, "EXPLAIN must explain one query that only reads")
		}
		var err error
		if at, err = reads(ctx, conn, inner, text, n); err != nil {
			return statement{}, err
		}
		if t, err := stmtType(ctx, conn, inner); err != nil {
			return statement{}, err
		} else if t != duckdb.STATEMENT_TYPE_SELECT {
			return statement{}, refusal(text, n, "EXPLAIN must explain a query that only reads, not a "+typeName(t))
		}
	}
	var t duckdb.StmtType
	var cols []resultCol
	var err error
	if want == duckdb.STATEMENT_TYPE_SELECT && kw != "PRAGMA" {
		t, cols, err = described(ctx, conn, text)
	} else {
		t, cols, err = prepared(ctx, conn, text)
	}
	if err != nil {
		return statement{}, err
	}
	if t != want {
		return statement{}, refusal(text, n, "it is a "+typeName(t)+" statement")
	}
	return statement{text: text, keyword: kw, cols: cols, at: at}, nil
}

// Rule 3. Every fragment the views read is verified as a query reads it
// (verify.go: worldfs_checked), and DuckDB may open any file in the
// directories the views read (readonly.go), so a statement that named a
// fragment itself, or the views' lists of them (the worldfs_files_*
// variables, worldfs_fragments.path), would read it unverified. A
// statement therefore reads files only through the views: the table
// functions it calls are the views' own macros (<table>_at) and those in
// tableFuncs, none of which opens a file; and a table it names that
// could be a file's name (DuckDB reads 'x.parquet', "x.parquet" and
// x.parquet as files when no table has that name) must be a table or view
// of the database. Plain names cannot name a file, so a misspelt view
// still gets DuckDB's own error. Reading the lists is harmless (no
// function that takes them opens a file), and a statement cannot change
// them (SET VARIABLE is refused by rule 1). Files outside those
// directories DuckDB refuses to open at all, so no query that worked on
// them is lost.

// tableFuncs are DuckDB's table functions that statements may call: they
// generate rows or read the catalog, and open no file.
var tableFuncs = map[string]bool{
	"range": true, "generate_series": true, "unnest": true, "repeat": true, "repeat_row": true,
	"json_each": true, "json_tree": true,
	"duckdb_columns": true, "duckdb_constraints": true, "duckdb_databases": true, "duckdb_dependencies": true,
	"duckdb_functions": true, "duckdb_indexes": true, "duckdb_keywords": true, "duckdb_memory": true,
	"duckdb_optimizers": true, "duckdb_schemas": true, "duckdb_sequences": true, "duckdb_settings": true,
	"duckdb_tables": true, "duckdb_temporary_files": true, "duckdb_types": true, "duckdb_variables": true, "duckdb_views": true,
	"pragma_table_info": true, "pragma_show": true, "pragma_storage_info": true, "pragma_metadata_info": true,
	"pragma_database_size": true, "pragma_version": true, "pragma_platform": true, "pragma_user_agent": true,
	"pragma_collations": true,
}

// ReadsAllowed says, for refusals of rule 3, how a statement reads.
const ReadsAllowed = "worldfs sql reads files only through the views (<table>, <table>_raw, <table>_at(t), worldfs_facts, " +
	"worldfs_receipts), which verify each fragment as a query reads it; a fragment read any other way would go unverified. " +
	"Its statements call no table function but the views' macros (<table>_at, _diff, _changes, _as_of), range, generate_series, unnest, repeat, repeat_row, " +
	"json_each, json_tree and the catalog's listings (duckdb_tables, duckdb_columns, duckdb_views, pragma_table_info, …), " +
	"and name no file as a table"

// reads applies rule 3 to body (text itself, or the statement text
// explains), the n-th statement of its query: DuckDB's parser (json_serialize_sql,
// which parses and runs nothing) gives its tree, whose table functions and
// tables are checked. It returns the calls of the views' _at macros with
// a constant tick, for notes (Run).
func reads(ctx context.Context, conn *sql.Conn, body, text string, n int) ([]atCall, error) {
	var js string
	if err := conn.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)::VARCHAR", body).Scan(&js); err != nil {
		return nil, fmt.Errorf("statement %d (%s): reading its parse tree: %w", n, abbrev(text), err)
	}
	var tree struct {
		Error      bool   `json:"error"`
		Message    string `json:"error_message"`
		Statements []any  `json:"statements"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber() // a tick is an int64
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("statement %d (%s): reading its parse tree: %w", n, abbrev(text), err)
	}
	if tree.Error || len(tree.Statements) != 1 {
		// Only a SELECT has a tree (WITH … INSERT, say, has none).
		return nil, refusal(text, n, "it is not a query that only reads (DuckDB: "+tree.Message+")")
	}
	// The database's own table macros, and its tables and views (temporary,
	// internal and system ones too) as database NUL schema NUL name, all
	// lower case: read when needed.
	var macros, relations []string
	var at []atCall
	err := walk(tree.Statements[0], func(node map[string]any) error {
		switch node["type"] {
		case "TABLE_FUNCTION":
			fn, _ := node["function"].(map[string]any)
			name, _ := fn["function_name"].(string)
			name = strings.ToLower(name)
			if tableFuncs[name] {
				return nil
			}
			if macros == nil {
				var err error
				if macros, err = column(ctx, conn, "SELECT name FROM "+macroTable); err != nil {
					return err
				}
			}
			if name != "" && slices.Contains(macros, name) {
				if tick, ok := constantTick(fn["children"]); ok {
					at = append(at, atCall{macro: name, tick: tick})
				}
				return nil
			}
			return refusedf("statement %d (%s) is refused: it calls the table function %s. %s", n, abbrev(text), name, ReadsAllowed)
		case "BASE_TABLE":
			var parts, named []string
			for _, k := range []string{"catalog_name", "schema_name", "table_name"} {
				v, _ := node[k].(string)
				parts = append(parts, strings.ToLower(v))
				if v != "" {
					named = append(named, v)
				}
			}
			full := strings.Join(named, ".")
			if !strings.ContainsAny(full, `./\:`) {
				return nil
			}
			if relations == nil {
				var err error
				if relations, err = column(ctx, conn, "SELECT lower(database_name || chr(0) || schema_name || chr(0) || table_name) FROM duckdb_tables() "+
					"UNION ALL SELECT lower(database_name || chr(0) || schema_name || chr(0) || view_name) FROM duckdb_views()"); err != nil {
					return err
				}
			}
			if !slices.ContainsFunc(relations, func(r string) bool { return refersTo(parts, strings.Split(r, "\x00")) }) {
				return refusedf("statement %d (%s) is refused: no table or view is called %q, so DuckDB would read it as a file. %s", n, abbrev(text), full, ReadsAllowed)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return at, nil
}

// constantTick returns the tick of a macro call whose arguments (children
// in the parse tree) are one integer constant.
func constantTick(children any) (int64, bool) {
	args, _ := children.([]any)
	if len(args) != 1 {
		return 0, false
	}
	arg, _ := args[0].(map[string]any)
	if arg["class"] != "CONSTANT" {
		return 0, false
	}
	v, _ := arg["value"].(map[string]any)
	num, ok := v["value"].(json.Number)
	if !ok {
		return 0, false
	}
	tick, err := num.Int64()
	return tick, err == nil
}

// macroTable lists the table macros the views defined (open writes it):
// the only ones a query may call besides tableFuncs, since user SQL
// defines nothing.
const macroTable = "worldfs_table_macros"

// refersTo says whether a table reference (catalog, schema, table) names
// relation r (database, schema, name): as table, schema.table,
// database.table (its main schema) or database.schema.table.
func refersTo(ref, r []string) bool {
	cat, sch, tab := ref[0], ref[1], ref[2]
	switch {
	case len(r) != 3 || r[2] != tab:
		return false
	case cat != "":
		return r[0] == cat && r[1] == sch
	case sch != "":
		return r[1] == sch || r[0] == sch && r[1] == "main"
	}
	return true
}

// walk calls visit with every object of a parse tree, in order.
func walk(v any, visit func(map[string]any) error) error {
	switch x := v.(type) {
	case map[string]any:
		if err := visit(x); err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := walk(x[k], visit); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := walk(e, visit); err != nil {
				return err
			}
		}
	}
	return nil
}

// column returns the values of the one column of q on conn.
func column(ctx context.Context, conn *sql.Conn, q string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// stmtType prepares the single statement text on conn (which runs
// nothing: text is one statement) and returns its type.
func stmtType(ctx context.Context, conn *sql.Conn, text string) (duckdb.StmtType, error) {
	t, _, err := prepared(ctx, conn, text)
	return t, err
}

// resultCol is a column of a statement's result: its name, and its type
// (nil when the driver cannot describe it).
type resultCol struct {
	name string
	info duckdb.TypeInfo
}

// described is prepared for a statement with a SELECT's parse tree
// (rule 3 passed), by way of FROM (text) LIMIT 0: DuckDB binds text as
// fully and gives the same columns, but plans nothing to run, where
// preparing text itself plans it whole (a view over thousands of files
// looks each up: ~70 ms for 5,000, and the run plans it again). What
// prepares so is a SELECT, as only a select statement is a subquery; a
// statement that does not is prepared by itself, for its own type or its
// own error.
func described(ctx context.Context, conn *sql.Conn, text string) (duckdb.StmtType, []resultCol, error) {
	if t, cols, err := prepared(ctx, conn, subquery(text, "LIMIT 0")); err == nil && t == duckdb.STATEMENT_TYPE_SELECT && !renamed(cols) {
		return t, cols, nil
	}
	return prepared(ctx, conn, text)
}

// renamed says whether DuckDB may have renamed columns of a subquery's
// result, which it does to a name an earlier column has (case aside): the
// later one becomes name_k. A result with no column named base_k beside
// one named base has none renamed.
func renamed(cols []resultCol) bool {
	names := make(map[string]bool, len(cols))
	for _, c := range cols {
		names[strings.ToLower(c.name)] = true
	}
	for _, c := range cols {
		i := strings.LastIndexByte(c.name, '_')
		if i > 0 && i < len(c.name)-1 && strings.Trim(c.name[i+1:], "0123456789") == "" && names[strings.ToLower(c.name[:i])] {
			return true
		}
	}
	return false
}

// subquery returns the query FROM (text) AS worldfs_result rest, text
// being one complete statement: it closes every parenthesis, string and
// quoted name it opens, and the line break ends a trailing -- comment.
// FROM first, so that text's lines keep their numbers in DuckDB's errors.
func subquery(text, rest string) string {
	return "FROM (" + text + "\n) AS worldfs_result " + rest
}

// projected returns the query that gives the n-th statement text's
// result with column i computed by exprs[i], an expression over #1 …
// #k, text's columns by position: subquery(text, SELECT exprs), checked
// as a statement of its own, so that wrapping text cannot make it do
// anything the gate would refuse. It must be one statement (rule 2) that
// reads files only through the views (rule 3); having a parse tree it is
// a SELECT (rule 4) and is not prepared here, its run plans it.
func projected(ctx context.Context, conn *sql.Conn, text string, n int, exprs []string) (string, error) {
	q := subquery(text, "SELECT "+strings.Join(exprs, ", "))
	if m, err := countStatements(q); err != nil || m != 1 {
		return "", refusedf("statement %d (%s) is refused: its result could not be projected as one query (%v)", n, abbrev(text), err)
	}
	if _, err := reads(ctx, conn, q, q, n); err != nil {
		return "", err
	}
	return q, nil
}

// prepared is stmtType that also returns the columns of the statement's
// result.
func prepared(ctx context.Context, conn *sql.Conn, text string) (duckdb.StmtType, []resultCol, error) {
	var t duckdb.StmtType
	var cols []resultCol
	err := conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("the DuckDB connection cannot prepare statements")
		}
		st, err := pc.PrepareContext(ctx, text)
		if err != nil {
			return err
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("the DuckDB statement has no type")
		}
		if t, err = ds.StatementType(); err != nil {
			return err
		}
		n, err := ds.ColumnCount()
		if err != nil {
			return err
		}
		for i := range n {
			name, err := ds.ColumnName(i)
			if err != nil {
				return err
			}
			info, _ := ds.ColumnTypeInfo(i) // a type the driver does not know is nil
			cols = append(cols, resultCol{name: name, info: info})
		}
		return nil
	})
	return t, cols, err
}

func typeName(t duckdb.StmtType) string {
	switch t {
	case duckdb.STATEMENT_TYPE_SELECT:
		return "SELECT"
	case duckdb.STATEMENT_TYPE_INSERT:
		return "INSERT"
	case duckdb.STATEMENT_TYPE_UPDATE:
		return "UPDATE"
	case duckdb.STATEMENT_TYPE_DELETE:
		return "DELETE"
	case duckdb.STATEMENT_TYPE_EXPLAIN:
		return "EXPLAIN"
	case duckdb.STATEMENT_TYPE_COPY:
		return "COPY"
	case duckdb.STATEMENT_TYPE_PRAGMA:
		return "PRAGMA"
	case duckdb.STATEMENT_TYPE_SET, duckdb.STATEMENT_TYPE_VARIABLE_SET:
		return "SET"
	case duckdb.STATEMENT_TYPE_CREATE:
		return "CREATE"
	case duckdb.STATEMENT_TYPE_CALL:
		return "CALL"
	}
	return fmt.Sprintf("type-%d", t)
}

// abbrev is the start of a statement, for messages.
func abbrev(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// The parser: a DuckDB of its own, with no file access, that only counts
// statements (it never prepares or runs them).
var parser struct {
	sync.Mutex
	ok   bool
	err  error
	db   mapping.Database
	conn mapping.Connection
}

// countStatements returns the number of statements DuckDB parses in
// query, or its parse error.
func countStatements(query string) (int, error) {
	parser.Lock()
	defer parser.Unlock()
	if !parser.ok && parser.err == nil {
		parser.err = openParser()
		parser.ok = parser.err == nil
	}
	if parser.err != nil {
		return 0, parser.err
	}
	var st mapping.ExtractedStatements
	n := mapping.ExtractStatements(parser.conn, query, &st)
	defer mapping.DestroyExtracted(&st)
	if n == 0 {
		if msg := mapping.ExtractStatementsError(st); msg != "" {
			return 0, errors.New(msg)
		}
	}
	return int(n), nil
}

func openParser() error {
	var cfg mapping.Config
	if mapping.CreateConfig(&cfg) == mapping.StateError {
		return errors.New("the SQL parser: no DuckDB configuration")
	}
	defer mapping.DestroyConfig(&cfg)
	for _, kv := range [][2]string{{"enable_external_access", "false"}, {"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"}, {"lock_configuration", "true"}} {
		if mapping.SetConfig(cfg, kv[0], kv[1]) == mapping.StateError {
			return fmt.Errorf("the SQL parser: setting %s", kv[0])
		}
	}
	var msg string
	if mapping.OpenExt("", &parser.db, cfg, &msg) == mapping.StateError {
		return fmt.Errorf("the SQL parser: %s", msg)
	}
	if mapping.Connect(parser.db, &parser.conn) == mapping.StateError {
		mapping.Close(&parser.db)
		return errors.New("the SQL parser: no connection")
	}
	return nil
}

// split cuts query at the semicolons that end its statements (not those
// in strings, quoted identifiers, dollar quotes or comments). The gate
// does not rely on it for safety: DuckDB's parser counts each piece.
func split(query string) []string {
	var out []string
	start := 0
	for i := 0; i < len(query); {
		switch c := query[i]; {
		case c == ';':
			out = append(out, query[start:i])
			i++
			start = i
		case c == '\'' || c == '"':
			i = skipQuoted(query, i)
		case c == '$':
			i = skipDollar(query, i)
		case c == '-' || c == '/':
			if j := skipComment(query, i); j > i {
				i = j
			} else {
				i++
			}
		default:
			i++
		}
	}
	return append(out, query[start:])
}

// skipQuoted returns the index after the quoted text starting at i (a
// doubled quote is one quote; after E, a backslash escapes).
func skipQuoted(s string, i int) int {
	q := s[i]
	esc := q == '\'' && i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i < 2 || !isIdent(s[i-2]))
	for j := i + 1; j < len(s); j++ {
		switch {
		case esc && s[j] == '\\':
			j++
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

// skipDollar returns the index after a dollar-quoted string starting at
// i ($tag$…$tag$), or i+1 if none starts there.
func skipDollar(s string, i int) int {
	if i > 0 && isIdent(s[i-1]) {
		return i + 1
	}
	j := i + 1
	for j < len(s) && isIdent(s[j]) {
		if j == i+1 && s[j] >= '0' && s[j] <= '9' {
			return i + 1 // $1: a parameter
		}
		j++
	}
	if j >= len(s) || s[j] != '$' {
		return i + 1
	}
	tag := s[i : j+1]
	if k := strings.Index(s[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag)
	}
	return len(s)
}

// skipComment returns the index after a comment starting at i (-- to the
// end of the line; /* */, nested), or i if none starts there.
func skipComment(s string, i int) int {
	switch {
	case strings.HasPrefix(s[i:], "--"):
		if k := strings.IndexByte(s[i:], '\n'); k >= 0 {
			return i + k + 1
		}
		return len(s)
	case strings.HasPrefix(s[i:], "/*"):
		depth := 0
		for j := i; j < len(s); {
			switch {
			case strings.HasPrefix(s[j:], "/*"):
				depth++
				j += 2
			case strings.HasPrefix(s[j:], "*/"):
				depth--
				j += 2
				if depth == 0 {
					return j
				}
			default:
				j++
			}
		}
		return len(s)
	}
	return i
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// skipSpace returns the index of the first character of s at or after i
// that is neither white space nor in a comment.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			i++
			continue
		}
		if j := skipComment(s, i); j > i {
			i = j
			continue
		}
		break
	}
	return i
}

// firstWord returns the first keyword of s, upper case ("(" for an
// opening parenthesis; "" for anything else), and the text after it.
func firstWord(s string) (string, string) {
	i := skipSpace(s, 0)
	if i < len(s) && s[i] == '(' {
		return "(", s[i+1:]
	}
	j := i
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	return strings.ToUpper(s[i:j]), s[j:]
}

// explained returns the statement that EXPLAIN's rest explains: after an
// optional ANALYZE and an optional parenthesised list of options (words,
// commas and white space only).
func explained(rest string) (string, bool) {
	if w, after := firstWord(rest); w == "ANALYZE" || w == "ANALYSE" {
		rest = after
	}
	i := skipSpace(rest, 0)
	if i < len(rest) && rest[i] == '(' {
		j := strings.IndexByte(rest[i:], ')')
		if j < 0 {
			return "", false
		}
		for _, c := range []byte(rest[i+1 : i+j]) {
			if !isIdent(c) && c != ',' && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return "", false
			}
		}
		// The options are words, so the text after them is the statement
		// (unless it starts with a parenthesis, which the options would
		// not be told from: refused).
		rest = rest[i+j+1:]
		if k := skipSpace(rest, 0); k < len(rest) && rest[k] == '(' {
			return "", false
		}
	}
	return rest, strings.TrimSpace(rest) != ""
}
