package serve

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/worldfs/worldfs/sql"
)

// How a result column goes on the wire (docs/INTERNALS.md, "serve").
//
// Each DuckDB type has the PostgreSQL type a client decodes it as
// (typeOf). In text format a value is DuckDB's own rendering of it,
// CAST(value AS VARCHAR), the text worldfs sql prints, except where a
// PostgreSQL client reads that type's text otherwise: a boolean is t or
// f, a float's infinities and NaN are Infinity, -Infinity and NaN, a
// BLOB is bytea's hex form (\x0a1b) and a list is a PostgreSQL array
// literal ({1,2,NULL}) of its elements' renderings. In binary format a
// value is the driver's (DuckDB's own value, not its text) encoded by
// pgtype, the codecs of pgx. Types PostgreSQL has no counterpart for
// (STRUCT, MAP, UNION, nested lists, …) are text in both formats: their
// DuckDB rendering, as worldfs sql prints them.

// render says how a column's values are rendered.
type render uint8

const (
	// renderText: CAST(#i AS VARCHAR) in both formats (text, json, and
	// every type without a PostgreSQL counterpart).
	renderText render = iota
	// renderTyped: CAST(#i AS VARCHAR) in text format; the driver's value,
	// encoded by pgtype, in binary.
	renderTyped
	// renderBool, renderFloat: as renderTyped, with the text mended (t/f;
	// Infinity, NaN).
	renderBool
	renderFloat
	// renderBytea: the driver's bytes, hex in text format.
	renderBytea
	// renderArray: CAST(#i AS VARCHAR[]) as a PostgreSQL array literal in
	// text format; the driver's list, encoded by pgtype, in binary.
	renderArray
)

// wireType is the PostgreSQL type of a result column, and how its values
// are rendered.
type wireType struct {
	oid  uint32
	size int16 // pg_type.typlen: -1 for a type of variable length
	how  render
	elem *wireType // renderArray: the element's
	// duck is the DuckDB type, for values the driver gives in a Go type
	// pgtype cannot encode as oid (binary).
	duck duckdb.Type
}

var textType = wireType{oid: pgtype.TextOID, size: -1, how: renderText}

// typeOf returns the wire type of a DuckDB type (nil: one the driver
// cannot describe, sent as text).
func typeOf(info duckdb.TypeInfo) wireType {
	if info == nil {
		return textType
	}
	t := info.InternalType()
	switch t {
	case duckdb.TYPE_VARCHAR:
		if strings.EqualFold(info.Alias(), "JSON") {
			return jsonType
		}
	case duckdb.TYPE_LIST, duckdb.TYPE_ARRAY:
		var child duckdb.TypeInfo
		switch d := info.Details().(type) {
		case *duckdb.ListDetails:
			child = d.Child
		case *duckdb.ArrayDetails:
			child = d.Child
		}
		if child == nil {
			return textType
		}
		ct := child.InternalType()
		return arrayOf(typeOf(child), ct == duckdb.TYPE_VARCHAR || ct == duckdb.TYPE_ENUM, t)
	}
	return scalarType(t)
}

var jsonType = wireType{oid: pgtype.JSONOID, size: -1, how: renderText}

// arrayOf is the wire type of a list of e: an array of a scalar, else
// text (a list of lists, structs, …); text: e is of VARCHAR or an ENUM.
func arrayOf(e wireType, text bool, t duckdb.Type) wireType {
	scalar := e.how != renderText && e.how != renderArray || text
	if oid, ok := arrayOIDs[e.oid]; ok && scalar {
		return wireType{oid: oid, size: -1, how: renderArray, elem: &e, duck: t}
	}
	return textType
}

// scalarType is the wire type of a DuckDB type that is not nested (any
// other is text).
func scalarType(t duckdb.Type) wireType {
	typed := func(oid uint32, size int16) wireType {
		return wireType{oid: oid, size: size, how: renderTyped, duck: t}
	}
	switch t {
	case duckdb.TYPE_BOOLEAN:
		return wireType{oid: pgtype.BoolOID, size: 1, how: renderBool, duck: t}
	case duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_UTINYINT:
		return typed(pgtype.Int2OID, 2)
	case duckdb.TYPE_INTEGER, duckdb.TYPE_USMALLINT:
		return typed(pgtype.Int4OID, 4)
	case duckdb.TYPE_BIGINT, duckdb.TYPE_UINTEGER:
		return typed(pgtype.Int8OID, 8)
	case duckdb.TYPE_UBIGINT, duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT, duckdb.TYPE_DECIMAL:
		return typed(pgtype.NumericOID, -1)
	case duckdb.TYPE_FLOAT:
		return wireType{oid: pgtype.Float4OID, size: 4, how: renderFloat, duck: t}
	case duckdb.TYPE_DOUBLE:
		return wireType{oid: pgtype.Float8OID, size: 8, how: renderFloat, duck: t}
	case duckdb.TYPE_DATE:
		return typed(pgtype.DateOID, 4)
	case duckdb.TYPE_TIME:
		return typed(pgtype.TimeOID, 8)
	case duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_S, duckdb.TYPE_TIMESTAMP_MS, duckdb.TYPE_TIMESTAMP_NS:
		return typed(pgtype.TimestampOID, 8)
	case duckdb.TYPE_TIMESTAMP_TZ:
		return typed(pgtype.TimestamptzOID, 8)
	case duckdb.TYPE_INTERVAL:
		return typed(pgtype.IntervalOID, 16)
	case duckdb.TYPE_UUID:
		return typed(pgtype.UUIDOID, 16)
	case duckdb.TYPE_BLOB:
		return wireType{oid: pgtype.ByteaOID, size: -1, how: renderBytea, duck: t}
	}
	return textType
}

// duckNames are DuckDB's names of the types scalarType maps (as
// duckdb_columns and the driver's column types name them).
var duckNames = map[string]duckdb.Type{
	"BOOLEAN": duckdb.TYPE_BOOLEAN, "TINYINT": duckdb.TYPE_TINYINT, "SMALLINT": duckdb.TYPE_SMALLINT,
	"UTINYINT": duckdb.TYPE_UTINYINT, "INTEGER": duckdb.TYPE_INTEGER, "USMALLINT": duckdb.TYPE_USMALLINT,
	"BIGINT": duckdb.TYPE_BIGINT, "UINTEGER": duckdb.TYPE_UINTEGER, "UBIGINT": duckdb.TYPE_UBIGINT,
	"HUGEINT": duckdb.TYPE_HUGEINT, "UHUGEINT": duckdb.TYPE_UHUGEINT, "FLOAT": duckdb.TYPE_FLOAT,
	"DOUBLE": duckdb.TYPE_DOUBLE, "DATE": duckdb.TYPE_DATE, "TIME": duckdb.TYPE_TIME,
	"TIMESTAMP": duckdb.TYPE_TIMESTAMP, "TIMESTAMP_S": duckdb.TYPE_TIMESTAMP_S, "TIMESTAMP_MS": duckdb.TYPE_TIMESTAMP_MS,
	"TIMESTAMP_NS": duckdb.TYPE_TIMESTAMP_NS, "TIMESTAMP WITH TIME ZONE": duckdb.TYPE_TIMESTAMP_TZ,
	"TIMESTAMPTZ": duckdb.TYPE_TIMESTAMP_TZ, "INTERVAL": duckdb.TYPE_INTERVAL, "UUID": duckdb.TYPE_UUID,
	"BLOB": duckdb.TYPE_BLOB, "VARCHAR": duckdb.TYPE_VARCHAR,
}

// typeOfName is typeOf for a type known by its DuckDB name only.
func typeOfName(name string) wireType {
	switch {
	case strings.HasSuffix(name, "[]"):
		elem := strings.TrimSuffix(name, "[]")
		return arrayOf(typeOfName(elem), elem == "VARCHAR", duckdb.TYPE_LIST)
	case name == "JSON":
		return jsonType
	case strings.HasPrefix(name, "DECIMAL"):
		return scalarType(duckdb.TYPE_DECIMAL)
	}
	if t, ok := duckNames[name]; ok {
		return scalarType(t)
	}
	return textType
}

// arrayOIDs are the array types of the element types a list is sent as
// an array of.
var arrayOIDs = map[uint32]uint32{
	pgtype.BoolOID: pgtype.BoolArrayOID, pgtype.Int2OID: pgtype.Int2ArrayOID, pgtype.Int4OID: pgtype.Int4ArrayOID,
	pgtype.Int8OID: pgtype.Int8ArrayOID, pgtype.Float4OID: pgtype.Float4ArrayOID, pgtype.Float8OID: pgtype.Float8ArrayOID,
	pgtype.NumericOID: pgtype.NumericArrayOID, pgtype.DateOID: pgtype.DateArrayOID, pgtype.TimestampOID: pgtype.TimestampArrayOID,
	pgtype.TimestamptzOID: pgtype.TimestamptzArrayOID, pgtype.TextOID: pgtype.TextArrayOID,
}

// expr is the expression over column #i (1-based) whose values the
// column's rendering in format starts from.
func (w wireType) expr(i int, format int16) string {
	switch {
	case w.how == renderBytea:
		return fmt.Sprintf("#%d", i)
	case w.how == renderArray && format == pgtype.TextFormatCode:
		return fmt.Sprintf("CAST(#%d AS VARCHAR[])", i)
	case w.how == renderText || format == pgtype.TextFormatCode:
		return fmt.Sprintf("CAST(#%d AS VARCHAR)", i)
	}
	return fmt.Sprintf("#%d", i)
}

// field is the column's RowDescription entry.
func (w wireType) field(name string, format int16) pgproto3.FieldDescription {
	return pgproto3.FieldDescription{
		Name: []byte(name), DataTypeOID: w.oid, DataTypeSize: w.size, TypeModifier: -1, Format: format,
	}
}

// encoder renders a result's values; one per connection (pgtype.Map is
// not safe for concurrent use).
type encoder struct {
	m *pgtype.Map
}

func newEncoder() *encoder { return &encoder{m: pgtype.NewMap()} }

// plan is a column's binary encode plan, kept for the Go type of the
// values it was made for (planning per value costs more than encoding).
type plan struct {
	t reflect.Type
	p pgtype.EncodePlan
}

// encode appends v encoded in binary as oid, through p's plan.
func (e *encoder) encode(p *plan, oid uint32, v any, buf []byte) ([]byte, error) {
	if t := reflect.TypeOf(v); p.p == nil || p.t != t {
		p.t, p.p = t, e.m.PlanEncode(oid, pgtype.BinaryFormatCode, v)
		if p.p == nil {
			return nil, fmt.Errorf("no binary encoding of a %T as type %d", v, oid)
		}
	}
	return p.p.Encode(v, buf)
}

// append appends v, a value of the column's expression (expr), rendered
// in format, to buf, planning through p. v is not nil (NULL is sent as
// such).
func (e *encoder) append(buf []byte, p *plan, w wireType, format int16, v any) ([]byte, error) {
	if format == pgtype.TextFormatCode {
		return appendText(buf, w, v)
	}
	switch w.how {
	case renderText:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("a %T where text was expected", v)
		}
		return append(buf, s...), nil
	case renderBytea:
		b, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("a %T where bytes were expected", v)
		}
		return append(buf, b...), nil
	case renderArray:
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("a %T where a list was expected", v)
		}
		elems := make([]any, len(list))
		for i, x := range list {
			if x != nil {
				elems[i] = pgValue(*w.elem, x)
			}
		}
		return e.encode(p, w.oid, elems, buf)
	}
	return e.encode(p, w.oid, pgValue(w, v), buf)
}

// pgValue is v, a value the DuckDB driver gives for w's DuckDB type, as
// a value pgtype encodes as w.oid.
func pgValue(w wireType, v any) any {
	switch x := v.(type) {
	case duckdb.Decimal:
		return pgtype.Numeric{Int: x.Value, Exp: -int32(x.Scale), Valid: true}
	case *big.Int:
		return pgtype.Numeric{Int: x, Valid: true}
	case uint64:
		return pgtype.Numeric{Int: new(big.Int).SetUint64(x), Valid: true}
	case uint32:
		return int64(x)
	case uint16:
		return int32(x)
	case uint8:
		return int16(x)
	case int8:
		return int16(x)
	case duckdb.Interval:
		return pgtype.Interval{Microseconds: x.Micros, Days: x.Days, Months: x.Months, Valid: true}
	case []byte:
		if w.oid == pgtype.UUIDOID && len(x) == 16 {
			return pgtype.UUID{Bytes: [16]byte(x), Valid: true}
		}
	case time.Time:
		switch w.oid {
		case pgtype.TimeOID:
			h, m, s := x.Clock()
			us := (int64(h)*3600+int64(m)*60+int64(s))*1e6 + int64(x.Nanosecond()/1000)
			return pgtype.Time{Microseconds: us, Valid: true}
		case pgtype.TimestampOID:
			return pgtype.Timestamp{Time: x, Valid: true}
		case pgtype.DateOID:
			return pgtype.Date{Time: x, Valid: true}
		}
	}
	return v
}

// appendText appends v, DuckDB's text of a value (or a BLOB's bytes, or
// a list of texts), in PostgreSQL's text form of w.
func appendText(buf []byte, w wireType, v any) ([]byte, error) {
	switch w.how {
	case renderBytea:
		b, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("a %T where bytes were expected", v)
		}
		buf = append(buf, `\x`...)
		return hex.AppendEncode(buf, b), nil
	case renderArray:
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("a %T where a list was expected", v)
		}
		buf = append(buf, '{')
		for i, x := range list {
			if i > 0 {
				buf = append(buf, ',')
			}
			if x == nil {
				buf = append(buf, "NULL"...)
				continue
			}
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("a %T where text was expected", x)
			}
			buf = appendArrayElem(buf, mended(*w.elem, s))
		}
		return append(buf, '}'), nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("a %T where text was expected", v)
	}
	return append(buf, mended(w, s)...), nil
}

// mended is s, DuckDB's text of a value of w, as PostgreSQL writes it.
func mended(w wireType, s string) string {
	switch w.how {
	case renderBool:
		switch s {
		case "true":
			return "t"
		case "false":
			return "f"
		}
	case renderFloat:
		switch s {
		case "inf":
			return "Infinity"
		case "-inf":
			return "-Infinity"
		case "nan", "-nan":
			return "NaN"
		}
	}
	return s
}

// appendArrayElem appends s as an element of an array literal: quoted
// when PostgreSQL's array parser would otherwise misread it.
func appendArrayElem(buf []byte, s string) []byte {
	quote := s == "" || strings.EqualFold(s, "NULL") || strings.ContainsAny(s, "{}\",\\ \t\n\r\v\f")
	if !quote {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, s[i])
	}
	return append(buf, '"')
}

// resultTypes are the wire types of a statement's columns.
func resultTypes(cols []sql.Column) []wireType {
	out := make([]wireType, len(cols))
	for i, c := range cols {
		out[i] = typeOf(c.Type)
	}
	return out
}

// paramOID is the PostgreSQL type a parameter of DuckDB type t is
// described as: a client sends its value in that type (an unknown type
// is text, which DuckDB casts as it binds).
func paramOID(t duckdb.Type) uint32 {
	switch t {
	case duckdb.TYPE_BOOLEAN:
		return pgtype.BoolOID
	case duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_UTINYINT:
		return pgtype.Int2OID
	case duckdb.TYPE_INTEGER, duckdb.TYPE_USMALLINT:
		return pgtype.Int4OID
	case duckdb.TYPE_BIGINT, duckdb.TYPE_UINTEGER:
		return pgtype.Int8OID
	case duckdb.TYPE_UBIGINT, duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT, duckdb.TYPE_DECIMAL:
		return pgtype.NumericOID
	case duckdb.TYPE_FLOAT:
		return pgtype.Float4OID
	case duckdb.TYPE_DOUBLE:
		return pgtype.Float8OID
	case duckdb.TYPE_DATE:
		return pgtype.DateOID
	case duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_S, duckdb.TYPE_TIMESTAMP_MS, duckdb.TYPE_TIMESTAMP_NS:
		return pgtype.TimestampOID
	case duckdb.TYPE_TIMESTAMP_TZ:
		return pgtype.TimestamptzOID
	case duckdb.TYPE_BLOB:
		return pgtype.ByteaOID
	}
	return pgtype.TextOID
}

// decodeParam returns a parameter's value for DuckDB to bind: NULL as
// nil, text as the string (DuckDB casts it to the parameter's type as it
// binds, as PostgreSQL reads a parameter's text), binary decoded by
// pgtype as the type oid the statement gave it (paramOID, or the one the
// client named in Parse).
func decodeParam(m *pgtype.Map, oid uint32, format int16, data []byte) (any, error) {
	if data == nil {
		return nil, nil
	}
	if format == pgtype.TextFormatCode {
		if oid == pgtype.ByteaOID {
			var b []byte
			if err := m.Scan(oid, format, data, &b); err != nil {
				return nil, err
			}
			return b, nil
		}
		return string(data), nil
	}
	switch oid {
	case pgtype.BoolOID:
		var v bool
		return v, m.Scan(oid, format, data, &v)
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		var v int64
		return v, m.Scan(oid, format, data, &v)
	case pgtype.Float4OID, pgtype.Float8OID:
		var v float64
		return v, m.Scan(oid, format, data, &v)
	case pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID:
		var v time.Time
		return v, m.Scan(oid, format, data, &v)
	case pgtype.ByteaOID:
		var v []byte
		return v, m.Scan(oid, format, data, &v)
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.JSONOID, pgtype.NameOID, pgtype.BPCharOID, pgtype.UnknownOID:
		return string(data), nil
	case pgtype.NumericOID:
		var n pgtype.Numeric
		if err := m.Scan(oid, format, data, &n); err != nil {
			return nil, err
		}
		text, err := n.MarshalJSON() // its exact decimal digits
		return string(text), err
	case pgtype.UUIDOID:
		var u pgtype.UUID
		if err := m.Scan(oid, format, data, &u); err != nil {
			return nil, err
		}
		return fmt.Sprintf("%x-%x-%x-%x-%x", u.Bytes[0:4], u.Bytes[4:6], u.Bytes[6:8], u.Bytes[8:10], u.Bytes[10:16]), nil
	}
	return nil, fmt.Errorf("a parameter of type %d in binary format: send it as text", oid)
}
