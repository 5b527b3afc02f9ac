package engine

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// WriteCSV writes the rows of the Parquet file r (of size bytes) to w as
// CSV with a header line: what a tick's .csv file in the mount holds. It
// is a function of the Parquet file's rows alone, so the same rows give
// the same bytes wherever they were read from, and the CSV's size is known
// once rendered. Numbers are written as DuckDB's CSV writer writes them
// (integers in decimal; floating point values in the shortest form that
// reads back exactly, with ".0" on whole numbers so that readers keep the
// column floating point; nan, inf and -inf), booleans as true and false,
// strings quoted when they must be (or are empty), NULL as an empty field.
func WriteCSV(w io.Writer, r io.ReaderAt, size int64) error {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	fields := f.Schema().Fields()
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for i, fd := range fields {
		if !fd.Leaf() || fd.Repeated() {
			return fmt.Errorf("csv: column %s is not a plain value", fd.Name())
		}
		if i > 0 {
			line = append(line, ',')
		}
		line = appendCSVString(line, fd.Name())
	}
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return err
	}
	rows := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				line = line[:0]
				for _, v := range row {
					if c := v.Column(); c > 0 {
						line = append(line, ',')
					}
					line = appendCSVValue(line, v)
				}
				line = append(line, '\n')
				if _, err := bw.Write(line); err != nil {
					rr.Close()
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rr.Close()
				return fmt.Errorf("csv: %w", err)
			}
		}
		if err := rr.Close(); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	return bw.Flush()
}

// appendCSVValue appends one value.
func appendCSVValue(dst []byte, v parquet.Value) []byte {
	if v.IsNull() {
		return dst
	}
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean())
	case parquet.Int32:
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Float:
		return appendCSVFloat(dst, float64(v.Float()), 32)
	case parquet.Double:
		return appendCSVFloat(dst, v.Double(), 64)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return appendCSVString(dst, string(v.ByteArray()))
	}
	return append(dst, v.String()...)
}

// appendCSVFloat appends f in the shortest form that reads back as f
// (bits 32 or 64), as DuckDB writes it.
func appendCSVFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	at := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, bits)
	if !strings.ContainsAny(string(dst[at:]), ".e") {
		dst = append(dst, ".0"...)
	}
	return dst
}

// appendCSVString appends s, quoted (with quotes doubled) if it is empty
// (so that it differs from NULL) or holds a comma, quote, line break or
// leading or trailing space.
func appendCSVString(dst []byte, s string) []byte {
	if s != "" && !strings.ContainsAny(s, ",\"\r\n") && strings.TrimSpace(s) == s {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	dst = append(dst, strings.ReplaceAll(s, `"`, `""`)...)
	return append(dst, '"')
}
