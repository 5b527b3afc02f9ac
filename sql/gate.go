package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
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
//  3. Prepared (which, for one statement, runs nothing), DuckDB must type
//     it SELECT (EXPLAIN: the explained statement, prepared by itself,
//     must be a SELECT): WITH … INSERT, say, passes 1 and fails here.
//
// The whole query is checked before any statement of it runs, and the
// parser's count of the whole must match the pieces'.

// ErrRefused: a statement that does not only read, refused by the gate.
var ErrRefused = errors.New("refused: worldfs sql only reads")

// refused is an error that is ErrRefused, with its own message.
type refused string

func (e refused) Error() string        { return string(e) }
func (e refused) Is(target error) bool { return target == ErrRefused }

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
	keyword string // its first keyword, upper case
}

// gated checks query on a connection of db (gate) and runs every
// statement but the last; it returns the connection (the caller closes it)
// and the last statement, for the caller to run its own way.
func gated(ctx context.Context, db *sql.DB, query string) (*sql.Conn, []statement, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	stmts, err := gate(ctx, conn, query)
	if err == nil {
		for _, st := range stmts[:len(stmts)-1] {
			if _, err = conn.ExecContext(ctx, st.text); err != nil {
				break
			}
		}
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, stmts, nil
}

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

// check applies rule 3 to the single statement text (rule 2), the n-th
// of its query, which passed rule 1.
func check(ctx context.Context, conn *sql.Conn, text string, n int) (statement, error) {
	kw, rest := firstWord(text)
	want := duckdb.STATEMENT_TYPE_SELECT
	if kw == "EXPLAIN" {
		want = duckdb.STATEMENT_TYPE_EXPLAIN
		inner, _ := explained(rest)
		if m, err := countStatements(inner); err != nil || m != 1 {
			return statement{}, refusal(text, n, "EXPLAIN must explain one query that only reads")
		}
		if t, err := stmtType(ctx, conn, inner); err != nil {
			return statement{}, err
		} else if t != duckdb.STATEMENT_TYPE_SELECT {
			return statement{}, refusal(text, n, "EXPLAIN must explain a query that only reads, not a "+typeName(t))
		}
	}
	t, err := stmtType(ctx, conn, text)
	if err != nil {
		return statement{}, err
	}
	if t != want {
		return statement{}, refusal(text, n, "it is a "+typeName(t)+" statement")
	}
	return statement{text: text, keyword: kw}, nil
}

// stmtType prepares the single statement text on conn (which runs
// nothing: text is one statement) and returns its type.
func stmtType(ctx context.Context, conn *sql.Conn, text string) (duckdb.StmtType, error) {
	var t duckdb.StmtType
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
		t, err = ds.StatementType()
		return err
	})
	return t, err
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
