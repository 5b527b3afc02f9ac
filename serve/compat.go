package serve

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// PostgreSQL's catalog, as clients browse it (psql's \d, JDBC's and
// DBeaver's metadata, SQLAlchemy's version check). DuckDB answers much of
// pg_catalog and information_schema itself, but not for temporary views
// (the views worldfs defines), not with PostgreSQL's type OIDs, and not in
// every form PostgreSQL's parser takes; and it keeps pg_catalog to itself
// (no object can be defined there). So each session's database gets
// worldfs's own versions of what clients ask (compatScript: temporary
// views and macros named worldfs_ and the name: worldfs_pg_class,
// worldfs_version), and a query's text names them
// instead of pg_catalog's (pgDialect), before the gate checks it: what
// runs is still only what the gate admits.

// compatRelations are the catalog relations worldfs answers itself.
var compatRelations = map[string]bool{"pg_class": true, "pg_namespace": true, "pg_attribute": true, "pg_roles": true, "pg_user": true}

// compatFunctions are the functions worldfs answers itself.
var compatFunctions = map[string]bool{
	"version": true, "pg_get_userbyid": true, "pg_table_is_visible": true, "format_type": true,
	"pg_get_expr": true, "pg_encoding_to_char": true, "obj_description": true, "col_description": true,
}

// hiddenRelations are the views' own plumbing, which the catalog does
// not list.
var hiddenRelations = []string{"worldfs_tick_list", "worldfs_table_macros"}

// pgTypeNames are the PostgreSQL names of the types the wire sends
// (types.go), by OID, for format_type and information_schema.
var pgTypeNames = [][2]string{
	{"16", "boolean"}, {"17", "bytea"}, {"20", "bigint"}, {"21", "smallint"}, {"23", "integer"}, {"25", "text"},
	{"114", "json"}, {"700", "real"}, {"701", "double precision"}, {"1082", "date"}, {"1083", "time without time zone"},
	{"1114", "timestamp without time zone"}, {"1184", "timestamp with time zone"}, {"1186", "interval"}, {"1700", "numeric"},
	{"2950", "uuid"}, {"1000", "boolean[]"}, {"1005", "smallint[]"}, {"1007", "integer[]"}, {"1016", "bigint[]"},
	{"1009", "text[]"}, {"1021", "real[]"}, {"1022", "double precision[]"}, {"1231", "numeric[]"}, {"1182", "date[]"},
	{"1115", "timestamp without time zone[]"}, {"1185", "timestamp with time zone[]"},
}

// compatScript is the SQL that defines worldfs's catalog on a session's
// database; version is what version() answers.
func compatScript(version string) string {
	var oidCase, nameCase strings.Builder
	// Each type's OID as the wire sends it (typeOfName).
	names := []string{"JSON"}
	for n := range duckNames {
		names = append(names, n, n+"[]")
	}
	slices.Sort(names)
	oidCase.WriteString("CASE")
	for _, n := range names {
		fmt.Fprintf(&oidCase, " WHEN t = '%s' THEN %d", n, typeOfName(n).oid)
	}
	fmt.Fprintf(&oidCase, " WHEN starts_with(t, 'DECIMAL') THEN %d ELSE %d END", pgtype.NumericOID, pgtype.TextOID)
	nameCase.WriteString("CASE oid")
	for _, p := range pgTypeNames {
		fmt.Fprintf(&nameCase, " WHEN %s THEN '%s'", p[0], p[1])
	}
	nameCase.WriteString(" ELSE 'text' END")
	hidden := "'" + strings.Join(hiddenRelations, "', '") + "'"
	return `
CREATE OR REPLACE TEMP MACRO worldfs_pg_typeoid(t) AS ` + oidCase.String() + `;
CREATE OR REPLACE TEMP MACRO worldfs_format_type(oid, typmod) AS ` + nameCase.String() + `;
CREATE OR REPLACE TEMP MACRO worldfs_version() AS '` + strings.ReplaceAll(version, "'", "''") + `';
CREATE OR REPLACE TEMP MACRO worldfs_pg_get_userbyid(id) AS 'worldfs';
CREATE OR REPLACE TEMP MACRO worldfs_pg_encoding_to_char(id) AS 'UTF8';
CREATE OR REPLACE TEMP MACRO worldfs_pg_get_expr(expr, relid, pretty := false) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO worldfs_obj_description(id, kind := NULL) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP MACRO worldfs_col_description(id, n) AS NULL::VARCHAR;
CREATE OR REPLACE TEMP VIEW worldfs_pg_rels AS
  SELECT view_oid AS oid, schema_oid AS nsp, view_name AS relname, 'v' AS relkind, column_count AS natts
  FROM duckdb_views() WHERE NOT internal AND view_name NOT IN (` + hidden + `) AND NOT starts_with(view_name, 'worldfs_pg_')
  UNION ALL
  SELECT table_oid, schema_oid, table_name, 'r', column_count
  FROM duckdb_tables() WHERE NOT internal AND table_name NOT IN (` + hidden + `) AND NOT starts_with(table_name, '` + resultPrefix + `');
CREATE OR REPLACE TEMP MACRO worldfs_pg_table_is_visible(id) AS id IN (SELECT oid FROM worldfs_pg_rels);
CREATE OR REPLACE TEMP VIEW worldfs_pg_namespace AS
  SELECT oid, CASE WHEN database_name = 'temp' THEN 'main' ELSE schema_name END AS nspname, 10::BIGINT AS nspowner, NULL::VARCHAR AS nspacl
  FROM duckdb_schemas()
  WHERE database_name = 'system' AND schema_name IN ('pg_catalog', 'information_schema') OR oid IN (SELECT nsp FROM worldfs_pg_rels);
CREATE OR REPLACE TEMP VIEW worldfs_pg_class AS
  SELECT oid, relname, nsp AS relnamespace, relkind, 10::BIGINT AS relowner, 0::BIGINT AS relam, 0::BIGINT AS reltablespace,
    0::BIGINT AS reltype, 0::BIGINT AS reloftype, 0::BIGINT AS reltoastrelid, 0::BIGINT AS relfilenode,
    natts::SMALLINT AS relnatts, 0::SMALLINT AS relchecks, false AS relhasindex, false AS relhasrules, false AS relhastriggers,
    false AS relhassubclass, false AS relrowsecurity, false AS relforcerowsecurity, false AS relispartition, false AS relisshared,
    false AS relhasoids, 'p' AS relpersistence, 'n' AS relreplident, -1::FLOAT AS reltuples, 0::INTEGER AS relpages,
    NULL::VARCHAR[] AS relacl, NULL::VARCHAR[] AS reloptions, NULL::VARCHAR AS relpartbound, false AS relispopulated
  FROM worldfs_pg_rels;
CREATE OR REPLACE TEMP VIEW worldfs_pg_attribute AS
  SELECT table_oid AS attrelid, column_name AS attname, worldfs_pg_typeoid(data_type) AS atttypid, column_index::SMALLINT AS attnum,
    -1::INTEGER AS atttypmod, -1::SMALLINT AS attlen, 0::SMALLINT AS attndims, NOT is_nullable AS attnotnull, false AS atthasdef,
    false AS atthasmissing, false AS attisdropped, '' AS attidentity, '' AS attgenerated, 0::BIGINT AS attcollation,
    true AS attislocal, 0::INTEGER AS attinhcount, NULL::VARCHAR[] AS attacl, NULL::VARCHAR[] AS attoptions
  FROM duckdb_columns() WHERE table_oid IN (SELECT oid FROM worldfs_pg_rels);
CREATE OR REPLACE TEMP VIEW worldfs_pg_roles AS
  SELECT 10::BIGINT AS oid, 'worldfs' AS rolname, false AS rolsuper, false AS rolinherit, false AS rolcreaterole,
    false AS rolcreatedb, true AS rolcanlogin, false AS rolreplication, -1 AS rolconnlimit, NULL::TIMESTAMPTZ AS rolvaliduntil;
CREATE OR REPLACE TEMP VIEW worldfs_pg_user AS
  SELECT 'worldfs' AS usename, 10::BIGINT AS usesysid, false AS usecreatedb, false AS usesuper;
`
}

// compatFunc names for the gate's table-function check: none of these
// is a table function, so the gate's rule 3 has nothing to add.

// compat defines worldfs's catalog on a session's database (worldfs's
// own SQL, as the views' script is: no user SQL runs here).
func compat(ctx context.Context, db *dbsql.DB) error {
	if _, err := db.ExecContext(ctx, compatScript(pgVersion)); err != nil {
		return fmt.Errorf("defining the PostgreSQL catalog: %w", err)
	}
	return nil
}

// pgVersion is what version() answers: PostgreSQL's form, which clients
// parse (SQLAlchemy, Metabase), naming worldfs.
const pgVersion = "PostgreSQL 15.0 (worldfs serve, over DuckDB)"

// pgDialect rewrites a query's PostgreSQL forms that DuckDB does not take
// as PostgreSQL means them, outside strings, quoted names and comments:
// pg_catalog's relations and functions that worldfs answers itself
// become worldfs's (compatScript), qualified or not;
// OPERATOR(pg_catalog.~) becomes ~; COLLATE pg_catalog.default goes; a
// cast to a reg* type (regclass, regtype, …) becomes a cast to VARCHAR,
// and pg_catalog. before a type name goes. The result is checked by the
// gate like any query.
func pgDialect(q string) string {
	if !strings.Contains(strings.ToLower(q), "pg_") && !strings.Contains(strings.ToLower(q), "version") &&
		!strings.Contains(strings.ToLower(q), "format_type") && !strings.Contains(strings.ToLower(q), "operator") {
		return q // the common case: nothing to rewrite
	}
	var b strings.Builder
	prevSig := byte(0) // the last character written that is not white space
	write := func(s string) {
		b.WriteString(s)
		if t := strings.TrimRight(s, " \t\r\n"); t != "" {
			prevSig = t[len(t)-1]
		}
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			end := min(j+1, len(q))
			write(q[i:end])
			i = end
		case strings.HasPrefix(q[i:], "--"):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			end := len(q)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(q[i:end])
			i = end
		case isIdentStart(c):
			j := i
			for j < len(q) && isIdentChar(q[j]) {
				j++
			}
			word := q[i:j]
			lower := strings.ToLower(word)
			k := skipSpaces(q, j)
			switch {
			case lower == "operator" && k < len(q) && q[k] == '(':
				if end := strings.IndexByte(q[k:], ')'); end > 0 {
					op := strings.TrimSpace(q[k+1 : k+end])
					op = strings.TrimPrefix(strings.TrimPrefix(op, "pg_catalog."), "PG_CATALOG.")
					write(" " + op + " ")
					i = k + end + 1
					continue
				}
			case lower == "collate":
				if rest := strings.ToLower(q[k:]); strings.HasPrefix(rest, "pg_catalog.default") || strings.HasPrefix(rest, `pg_catalog."default"`) {
					n := len("pg_catalog.default")
					if strings.HasPrefix(rest, `pg_catalog."default"`) {
						n += 2
					}
					i = k + n
					continue
				}
			case lower == "pg_catalog" && k < len(q) && q[k] == '.' && prevSig != '.':
				m := skipSpaces(q, k+1)
				e := m
				for e < len(q) && isIdentChar(q[e]) {
					e++
				}
				name := strings.ToLower(q[m:e])
				call := skipSpaces(q, e) < len(q) && q[skipSpaces(q, e)] == '('
				switch {
				case compatRelations[name] && !call, compatFunctions[name] && call:
					write("worldfs_" + name)
					i = e
					continue
				case prevSig == ':' && strings.HasPrefix(name, "reg"):
					write("VARCHAR")
					i = e
					continue
				case prevSig == ':':
					write(q[m:e]) // a type: DuckDB knows text, int4, … unqualified
					i = e
					continue
				}
			case prevSig != '.' && (compatRelations[lower] && !(k < len(q) && q[k] == '(') || compatFunctions[lower] && k < len(q) && q[k] == '('):
				write("worldfs_" + lower)
				i = j
				continue
			case prevSig == ':' && strings.HasPrefix(lower, "reg") && regTypes[lower]:
				write("VARCHAR")
				i = j
				continue
			}
			write(word)
			i = j
		default:
			write(string(c))
			i++
		}
	}
	return b.String()
}

// regTypes are PostgreSQL's OID alias types, cast to VARCHAR.
var regTypes = map[string]bool{"regclass": true, "regtype": true, "regproc": true, "regprocedure": true, "regnamespace": true, "regrole": true, "regoper": true, "regconfig": true}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
