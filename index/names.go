package index

import (
	"fmt"
	"strconv"
	"strings"
)

// The bucket layout (docs/ARCHITECTURE.md, "Bucket layout"): every object
// name worldfs reads or writes is built here, beside its parser.
//
//	worlds/<world>/marker.json                      the world's marker
//	worlds/<world>/log/<seq>                        catalog slots
//	worlds/<world>/checkpoints/<seq>                checkpoints
//	worlds/<world>/state/<hash>                     checkpoint shards
//	worlds/<world>/state/<hash>.sum                 tick shard summaries
//	worlds/<world>/state/<hash>.tok                 tick shard token filters
//	worlds/<world>/state/<checksum>.sums            a checkpoint's summaries
//	data/<world>/<run>/<table>/<token>.parquet      tick fragments
//	data/<world>/<run>/<table>/<token>/<n>.parquet  fact and claim fragments
//	data/<world>/<run>/<table>/compacted-<digest>-<intent>/0.parquet (and 0.ticks3; 0.ticks2, 0.ticks of older formats)
//	data/<world>/<run>/<table>/v0.2/…               legacy fragments
//	data/<world>/_tables/<id>.json                  table descriptions
//	data/<world>/_lineage/0.parquet                 a fork's lineage
//	assets/sha256/<hex>                             content-addressed assets
//	export/iceberg/<world>/<run>/…, export/registry/<world>/…  exports

// DefaultRun is the run a world's writers extend and its readers read
// when none is named.
const DefaultRun = "main"

// EvaluationRun is the run a world's evaluation receipts are claimed and
// stored in, beside its own runs.
const EvaluationRun = "_evaluations"

// LegacyToken is the token segment of legacy (v0.2) fragments: they are
// stored under data/<world>/<run>/<table>/v0.2/ and carry no commit
// columns.
const LegacyToken = "v0.2"

// compactedToken begins the token segment of a compacted file's name.
const compactedToken = "compacted-"

// MaxWorldIDLen bounds a world id.
const MaxWorldIDLen = 128

// ValidateWorldID checks a world id: 1 to MaxWorldIDLen characters from
// [a-z0-9._-], not starting with a dot or dash. Ids are path segments of the
// bucket layout and of the mount, so they are kept plain.
func ValidateWorldID(id string) error { return validateName("world id", id) }

// ValidateRunName checks a run name by the rules of world ids: runs are
// path segments too (data/<world>/<run>/…).
func ValidateRunName(run string) error { return validateName("run", run) }

func validateName(what, id string) error {
	if id == "" || len(id) > MaxWorldIDLen {
		return fmt.Errorf("%s %q: must be 1 to %d characters", what, id, MaxWorldIDLen)
	}
	if id[0] == '.' || id[0] == '-' {
		return fmt.Errorf("%s %q: must not start with %q", what, id, id[0])
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q: character %q is not one of a-z 0-9 . _ -", what, id, r)
		}
	}
	return nil
}

// DataPrefix is the bucket prefix of everything of world's tables: their
// fragments (data/<world>/<run>/…) and descriptions (data/<world>/_tables/).
func DataPrefix(world string) string { return "data/" + world + "/" }

// RunDataPrefix is the bucket prefix of the fragments of a world's run.
func RunDataPrefix(world, run string) string { return DataPrefix(world) + run + "/" }

// FragmentPath is where a fact batch's or a compaction's fragment lives:
// data/<world>/<run>/<table id>/<commit token>/<part>.parquet. Under its
// commit token, so that claim recovery finds orphan rows by token with one
// prefix listing, and so that a reader knows a fragment stored under its
// publication's own token was written by the attempt holding that token,
// which stamps every row with it. Tick fragments were stored so too, as
// part 0, and such names stay valid (ParseFragmentPath, Proven).
func FragmentPath(world, run, tableID, token string, part int) string {
	return fmt.Sprintf("%s%s/%s/%d.parquet", RunDataPrefix(world, run), tableID, token, part)
}

// TickFragmentPath is where a tick's fragment of a table lives:
// data/<world>/<run>/<table id>/<commit token>.parquet. Named by its
// commit token for the same reasons as FragmentPath, but with no directory
// of its own: a tick has one fragment per table, and a new directory per
// fragment costs a local bucket an inode and two more fsyncs (the
// directory's entry in its parent, and the fragment's entry in it).
func TickFragmentPath(world, run, tableID, token string) string {
	return fmt.Sprintf("%s%s/%s.parquet", RunDataPrefix(world, run), tableID, token)
}

// FragmentName is what a fragment's object name says.
type FragmentName struct {
	Run, Table, Token string
}

// ParseFragmentPath parses the name of a fragment of world stored by
// FragmentPath (data/<world>/<run>/<table>/<token>/<part>.parquet) or by
// TickFragmentPath (data/<world>/<run>/<table>/<token>.parquet). Any other
// object under data/<world>/ (table descriptions, lineage) is not one.
// Legacy (v0.2) fragments parse with the token "v0.2".
func ParseFragmentPath(world, name string) (FragmentName, bool) {
	rest, ok := strings.CutPrefix(name, DataPrefix(world))
	if !ok || !strings.HasSuffix(rest, ".parquet") {
		return FragmentName{}, false
	}
	parts := strings.Split(strings.TrimSuffix(rest, ".parquet"), "/")
	if len(parts) < 3 || len(parts) > 4 || strings.HasPrefix(parts[0], "_") || ValidateRunName(parts[0]) != nil || parts[1] == "" {
		return FragmentName{}, false
	}
	n := FragmentName{Run: parts[0], Table: parts[1], Token: parts[2]}
	if n.Token == "" || len(parts) == 4 && parts[3] == "" {
		return FragmentName{}, false
	}
	return n, true
}

// CompactedPath is where a compacted file lives: named, in the place of a
// commit token, by its content's digest (hex) and the id of the intent it
// was written under (invariant 16: every compaction writes objects of its
// own, which collection keeps while the intent is open; two compactors of
// the same rows write two objects, and the catalog names one). An empty
// intent gives the name of a file compacted before intents existed.
func CompactedPath(world, run, tableID, digest, intent string) string {
	token := compactedToken + digest
	if intent != "" {
		token += "-" + intent
	}
	return FragmentPath(world, run, tableID, token, 0)
}

// CompactedIntentOf returns the intent a compacted file at path (or its
// token) was written under ("": none, or not a compacted file).
func CompactedIntentOf(path string) string {
	token := path
	if i := strings.LastIndex(path, "/"+compactedToken); i >= 0 {
		token = path[i+1:]
		if j := strings.IndexByte(token, '/'); j >= 0 {
			token = token[:j]
		}
	}
	rest, ok := strings.CutPrefix(token, compactedToken)
	if !ok {
		return ""
	}
	_, intent, ok := strings.Cut(rest, "-")
	if !ok || !ValidIntentID(intent) {
		return ""
	}
	return intent
}

// IsCompactedToken reports whether a fragment name's token segment
// (FragmentName.Token) names a compacted file (CompactedPath).
func IsCompactedToken(token string) bool { return strings.HasPrefix(token, compactedToken) }

// LegacyPrefix is where a legacy (v0.2) table's fragments live.
func LegacyPrefix(world, run, tableID string) string {
	return RunDataPrefix(world, run) + tableID + "/" + LegacyToken + "/"
}

// TableInfoPrefix is where a world's table descriptions live.
func TableInfoPrefix(world string) string { return DataPrefix(world) + "_tables/" }

// TableInfoPath is where a world's description of table id lives.
func TableInfoPath(world, id string) string { return TableInfoPrefix(world) + id + ".json" }

// ParseTableInfoPath returns the table id whose description of world is
// called name (TableInfoPath); ok is false if name is not one (the id
// returned is then name less the prefix, if it has it).
func ParseTableInfoPath(world, name string) (string, bool) {
	id, ok := strings.CutPrefix(name, TableInfoPrefix(world))
	if !ok {
		return "", false
	}
	return strings.CutSuffix(id, ".json")
}

// LineagePath is where a fork's lineage rows live: one create-once
// fragment, written in one append, so a crash leaves all of it or none.
func LineagePath(world string) string { return DataPrefix(world) + "_lineage/0.parquet" }

// AssetPath is where the content-addressed store keeps the asset whose
// sha256 is hex (64 lowercase hex digits; the caller checks them).
func AssetPath(hex string) string { return "assets/sha256/" + hex }

// IcebergPrefix is where an Iceberg export of a world's run is written
// unless told otherwise.
func IcebergPrefix(world, run string) string { return "export/iceberg/" + world + "/" + run }

// ExportRegistryPrefix is where a world's exports are registered.
func ExportRegistryPrefix(world string) string { return "export/registry/" + world + "/" }

// ExportRegistryName is the registration of one exported table, named by
// hex (a hash of the table's location).
func ExportRegistryName(world, hex string) string { return ExportRegistryPrefix(world) + hex + ".json" }

// An exported Iceberg table lives under its location loc (an export
// prefix, then the table's name: IcebergTable): its metadata versions and
// manifests under metadata/, the filtered copies of files it names under
// data/, and the row checks of files under checks/.

// IcebergTable is the location of the exported table called table under
// an export prefix.
func IcebergTable(prefix, table string) string { return prefix + "/" + table }

// IcebergMetadataName is version v of a table's metadata: the name a
// Hadoop catalog finds by listing (v<N>.metadata.json, N from 1).
func IcebergMetadataName(loc string, v int) string {
	return fmt.Sprintf("%s/metadata/v%d.metadata.json", loc, v)
}

// IcebergMetadataPrefix is the listing prefix of a table's metadata
// versions.
func IcebergMetadataPrefix(loc string) string { return loc + "/metadata/v" }

// ParseIcebergMetadataName returns the version of the metadata called
// name, if name is one (IcebergMetadataName) of the table at loc.
func ParseIcebergMetadataName(loc, name string) (int, bool) {
	base := strings.TrimPrefix(name, loc+"/metadata/")
	num, ok := strings.CutSuffix(strings.TrimPrefix(base, "v"), ".metadata.json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// IcebergRefsName is the reference list of version v of a table's
// metadata (every bucket object its live snapshots reference, which
// collection keeps), named by hex (a hash of the version's bytes, so
// that a racing export's list for the same version number has a name of
// its own). It is not a name Hadoop catalogs take for a version.
func IcebergRefsName(loc string, v int, hex string) string {
	return fmt.Sprintf("%s/metadata/v%d-%s.refs", loc, v, hex)
}

// IcebergManifestName is the manifest of snapshot snap of a table.
func IcebergManifestName(loc string, snap int64) string {
	return fmt.Sprintf("%s/metadata/%016x-m0.avro", loc, uint64(snap))
}

// IcebergManifestListName is the manifest list of snapshot snap.
func IcebergManifestListName(loc string, snap int64) string {
	return fmt.Sprintf("%s/metadata/snap-%016x.avro", loc, uint64(snap))
}

// IcebergKeptName is the copy of a compacted file holding only the rows
// a view keeps of it, named by hex (a hash of the file and the span).
func IcebergKeptName(loc, hex string) string { return fmt.Sprintf("%s/data/keep-%s.parquet", loc, hex) }

// IcebergCheckedName is the copy of a file holding only its visible
// rows, named by hex (a hash of the file and the rows kept).
func IcebergCheckedName(loc, hex string) string {
	return fmt.Sprintf("%s/data/checked-%s.parquet", loc, hex)
}

// IcebergStampsName is the record of a file's row check, named by hex (a
// hash of the file's name and digest).
func IcebergStampsName(loc, hex string) string { return fmt.Sprintf("%s/checks/%s.json", loc, hex) }

// TickIndexPath is where the tick index of the compacted file at path
// lives: beside it, the same name with ".ticks3" for ".parquet"
// (…/compacted-<digest>/0.ticks3). Each format of the index has a name
// of its own (TickIndexPaths: ".ticks" the first, without CSV sizes;
// ".ticks2" the second, without column summaries), so that a reader that
// knows only an older format finds no index of the newer (and finds the
// older one, or gathers those ticks' rows another way) rather than one it
// cannot read. ParseFragmentPath takes none for a fragment; TickIndexOf
// finds their file.
func TickIndexPath(path string) string { return TickIndexPaths(path)[0] }

// TickIndexPaths are the names a tick index of the compacted file at
// path may have, one per format, the newest first (see TickIndexPath).
func TickIndexPaths(path string) []string {
	base := strings.TrimSuffix(path, ".parquet")
	out := make([]string, len(tickIndexSuffixes))
	for i, s := range tickIndexSuffixes {
		out[i] = base + s
	}
	return out
}

// tickIndexSuffixes are the tick index formats' suffixes, the newest
// first: the format is len(tickIndexSuffixes) - i.
var tickIndexSuffixes = []string{".ticks3", ".ticks2", ".ticks"}

// TickIndexOf returns the compacted file of world whose tick index (of
// any format) is called name, if name is one (TickIndexPaths).
func TickIndexOf(world, name string) (string, bool) {
	for _, s := range tickIndexSuffixes {
		base, ok := strings.CutSuffix(name, s)
		if !ok {
			continue
		}
		path := base + ".parquet"
		n, ok := ParseFragmentPath(world, path)
		if !ok || !IsCompactedToken(n.Token) {
			return "", false
		}
		return path, true
	}
	return "", false
}

// WorldPrefix is the bucket prefix of everything of world's catalog.
func WorldPrefix(world string) string { return "worlds/" + world + "/" }

// MarkerName is the world's create-once marker.
func MarkerName(world string) string { return WorldPrefix(world) + "marker.json" }

// LogPrefix is the prefix of the world's slots.
func LogPrefix(world string) string { return WorldPrefix(world) + "log/" }

// SlotName is the name of the slot whose first sequence is seq.
func SlotName(world string, seq uint64) string { return fmt.Sprintf("%s%016x", LogPrefix(world), seq) }

// CheckpointPrefix is the prefix of world's checkpoints.
func CheckpointPrefix(world string) string { return WorldPrefix(world) + "checkpoints/" }

// CheckpointName is the checkpoint covering the log through seq.
func CheckpointName(world string, seq uint64) string {
	return fmt.Sprintf("%s%016x", CheckpointPrefix(world), seq)
}

// ParseCheckpointName returns the sequence the checkpoint called name
// covers the log through.
func ParseCheckpointName(world, name string) (uint64, error) {
	seq, err := strconv.ParseUint(strings.TrimPrefix(name, CheckpointPrefix(world)), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a checkpoint name of world %s", name, world)
	}
	return seq, nil
}

// ShardPrefix is the prefix of world's checkpoint shards.
func ShardPrefix(world string) string { return WorldPrefix(world) + "state/" }

// ShardName is a content-addressed checkpoint shard.
func ShardName(world, hash string) string { return ShardPrefix(world) + hash }

// ShardSummaryName is the summary of the tick shard whose hash is hash
// (summary.go): the shard's name with ".sum".
func ShardSummaryName(world, hash string) string { return ShardName(world, hash) + summarySuffix }

// ShardOfSummary returns the name of the shard the summary called name
// summarizes, if name is a summary's.
func ShardOfSummary(name string) (string, bool) { return strings.CutSuffix(name, summarySuffix) }

const summarySuffix = ".sum"

// CheckpointSummariesName is the summaries object (summary.go) of the
// checkpoint whose checksum is sum: the tick shards' summaries in one.
func CheckpointSummariesName(world, sum string) string {
	return ShardPrefix(world) + sum + summariesSuffix
}

const summariesSuffix = ".sums"

// ShardTokenFilterName is the token filter of the tick shard whose hash
// is hash (tokenfilter.go): the shard's name with ".tok".
func ShardTokenFilterName(world, hash string) string {
	return ShardName(world, hash) + tokenFilterSuffix
}

// ShardOfSidecar returns the name of the shard that the object called
// name lies beside, if name is a shard's summary or token filter: it
// lives as long as its shard is named.
func ShardOfSidecar(name string) (string, bool) {
	if s, ok := ShardOfSummary(name); ok {
		return s, true
	}
	return strings.CutSuffix(name, tokenFilterSuffix)
}

const tokenFilterSuffix = ".tok"

// ParseSlotName returns the first sequence of the slot called name.
func ParseSlotName(world, name string) (uint64, error) {
	hex, ok := strings.CutPrefix(name, LogPrefix(world))
	if !ok || len(hex) != 16 {
		return 0, fmt.Errorf("%q is not a slot name of world %s", name, world)
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || hex != strings.ToLower(hex) {
		return 0, fmt.Errorf("%q is not a slot name of world %s", name, world)
	}
	return seq, nil
}
