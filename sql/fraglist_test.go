package sql

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go/compress/uncompressed"
)

// A list's name is the hash of every field of every row: rows that differ
// in any one field are another list, never the one already written (a
// script would read rows it was not built with: a file's proof, bounds or
// commit identity of another build); the same rows are the same list,
// reused as written.
func TestAListIsNamedByEveryFieldOfItsRows(t *testing.T) {
	keyChanges(t, listRow{})
	keyChanges(t, compactedRow{})
	keyChanges(t, tickRow{})

	dir := t.TempDir()
	rows := []tickRow{{World: "w", Run: "main", Tick: 1, PublishedMs: 5, CommitToken: "a", WriterEpoch: 1}}
	p1, err := writeRows(dir, "fragments-published", rows, &uncompressed.Codec{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p1)
	if err != nil || st.Size() == 0 {
		t.Fatalf("the list %s: %v", p1, err)
	}
	if p2, err := writeRows(dir, "fragments-published", rows, &uncompressed.Codec{}); err != nil || p2 != p1 {
		t.Fatalf("the same rows again: %s, %v; want %s", p2, err, p1)
	}
	rows[0].PublishedMs++
	if p3, err := writeRows(dir, "fragments-published", rows, &uncompressed.Codec{}); err != nil || p3 == p1 {
		t.Fatalf("rows of another publish time: %s, %v; want a list other than %s", p3, err, p1)
	}
}

// keyChanges fails unless changing any one field of a row of R changes
// its key (appendKey).
func keyChanges[R listRows](t *testing.T, zero R) {
	t.Helper()
	row := reflect.New(reflect.TypeOf(zero)).Elem()
	set := func(f reflect.Value, i int) {
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprint("v", i))
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(100 + i))
		case reflect.Bool:
			f.SetBool(i%2 == 0)
		default:
			t.Fatalf("%T: a field of kind %s the test does not know", zero, f.Kind())
		}
	}
	for i := range row.NumField() {
		set(row.Field(i), i)
	}
	base := row.Interface().(R).appendKey(nil)
	for i := range row.NumField() {
		changed := reflect.New(row.Type()).Elem()
		changed.Set(row)
		f := changed.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		default:
			f.SetInt(f.Int() + 1)
		}
		if bytes.Equal(changed.Interface().(R).appendKey(nil), base) {
			t.Errorf("%T: its key does not hold field %s", zero, row.Type().Field(i).Name)
		}
	}
}
