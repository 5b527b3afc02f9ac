package frame

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// unionOrder is the column types from narrowest to widest, as the SQL
// views' union of a table's schemas (DuckDB's UNION ALL BY NAME) widens
// them: a column the schemas give several types has the widest of them,
// each value cast from its own type straight to it. Every pair has a
// common type, some not lossless (an int64 as a float loses digits past
// 2^24, as a double past 2^53), as DuckDB casts them.
var unionOrder = []Type{Bool, Int32, Int64, Float32, Float64, String}

// UnionType is the type of a column that tables give types a and b in a
// union of their rows (UnionColumns, EncodeView): the wider of the two
// (see unionOrder), as the SQL views type it. An unknown type is an error.
func UnionType(a, b Type) (Type, error) {
	i, j := slices.Index(unionOrder, a), slices.Index(unionOrder, b)
	if i < 0 || j < 0 {
		return "", fmt.Errorf("column types %q and %q: a column is one of %s", string(a), string(b), typeList())
	}
	return unionOrder[max(i, j)], nil
}

// castValue casts v, a value of a column of type from, to type to (to is
// UnionType of from and another type), as DuckDB's CAST does: a boolean
// as 1 or 0, an integer rounded to the nearest float or double, and any
// value as a string as CAST(v AS VARCHAR) writes it (see AppendSQLFloat).
func castValue(v parquet.Value, from, to Type) parquet.Value {
	if from == to || v.IsNull() {
		return v
	}
	switch to {
	case String:
		var s []byte
		switch from {
		case Bool:
			s = strconv.AppendBool(s, v.Boolean())
		case Int32:
			s = strconv.AppendInt(s, int64(v.Int32()), 10)
		case Int64:
			s = strconv.AppendInt(s, v.Int64(), 10)
		case Float32:
			s = AppendSQLFloat(s, float64(v.Float()), 32)
		case Float64:
			s = AppendSQLFloat(s, v.Double(), 64)
		}
		return parquet.ByteArrayValue(s)
	case Float64:
		switch from {
		case Bool:
			return parquet.DoubleValue(float64(b2i(v.Boolean())))
		case Int32:
			return parquet.DoubleValue(float64(v.Int32()))
		case Int64:
			return parquet.DoubleValue(float64(v.Int64()))
		case Float32:
			return parquet.DoubleValue(float64(v.Float()))
		}
	case Float32:
		switch from {
		case Bool:
			return parquet.FloatValue(float32(b2i(v.Boolean())))
		case Int32:
			return parquet.FloatValue(float32(v.Int32()))
		case Int64:
			return parquet.FloatValue(float32(v.Int64())) // one rounding, not two through float64
		}
	case Int64:
		switch from {
		case Bool:
			return parquet.Int64Value(int64(b2i(v.Boolean())))
		case Int32:
			return parquet.Int64Value(int64(v.Int32()))
		}
	case Int32:
		if from == Bool {
			return parquet.Int32Value(int32(b2i(v.Boolean())))
		}
	}
	panic(fmt.Sprintf("frame: no cast from %s to %s", from, to)) // to is never narrower: see UnionType
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AppendSQLFloat appends f (of bits 32 or 64) as DuckDB's CAST(f AS
// VARCHAR) writes it: the shortest digits that read back as f, in
// positional form with ".0" on whole numbers when its decimal exponent is
// in -4..15, else in exponent form with at least two exponent digits
// (1e+16, 1.5e-05); nan (-nan with its sign bit set), inf and -inf.
func AppendSQLFloat(dst []byte, f float64, bits int) []byte {
	if word := nonFinite(f, true); word != "" {
		return append(dst, word...)
	}
	at := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
	e := slices.Index(dst[at:], 'e')
	if exp, _ := strconv.Atoi(string(dst[at+e+1:])); exp < -4 || exp >= 16 {
		return dst
	}
	dst = strconv.AppendFloat(dst[:at], f, 'f', -1, bits)
	if !slices.Contains(dst[at:], '.') {
		dst = append(dst, ".0"...)
	}
	return dst
}
