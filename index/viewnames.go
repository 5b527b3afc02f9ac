package index

import "strings"

// The views' files: what package sql keeps in its views directory
// (sql.Options.Dir, <cache dir>/views) beside the bucket, named here so
// that collection (package maintenance, which never imports sql) finds
// them by the same rule: fragment lists and the empty files that witness
// a table's schema (docs/ARCHITECTURE.md, "The bucket layout", below the
// table).

// Kinds of views' files (ViewsFileName).
const (
	ViewsFragments          = "fragments"           // a list of fragment files, by its rows' hash
	ViewsTicksFragments     = "fragments-ticks"     // a list of compacted ticks, by its rows' hash
	ViewsPublishedFragments = "fragments-published" // a list of published ticks, by its rows' hash
	ViewsEmpty              = "empty"               // the empty file of a table's schema, by table id
)

// ViewsFileName is the name of the views' file of kind (a Views* kind)
// for key.
func ViewsFileName(kind, key string) string { return kind + "-" + key + ".parquet" }

// IsViewsFileName reports whether name (a base name) is one that
// ViewsFileName builds.
func IsViewsFileName(name string) bool {
	return strings.HasSuffix(name, ".parquet") &&
		(strings.HasPrefix(name, ViewsFragments+"-") || strings.HasPrefix(name, ViewsEmpty+"-"))
}
