package frame

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// What an export references from outside the catalog, as the bucket holds
// it: the export registry's records and each exported table version's
// reference list. An export (package export/iceberg) writes them;
// collection (package maintenance) reads them and keeps what they name
// (docs/ARCHITECTURE.md, "Export and transfer").

// ExportRegistration is an export registry record: one per exported
// table and world whose objects the table names, created once before the
// table's first metadata version. Its name is ExportRegistryName of the
// world and the first 8 bytes of the sha256 of Table, in hex
// (ExportRegistrationName), which binds it to the table it names.
type ExportRegistration struct {
	Table string `json:"table"`           // the object prefix of the table
	Base  string `json:"base"`            // the URI the metadata names objects by
	World string `json:"world,omitempty"` // the world exported ("": the registry's own)
}

// ExportRegistrationName is where world's registration of the table at
// location table lives.
func ExportRegistrationName(world, table string) string {
	sum := sha256.Sum256([]byte(table))
	return index.ExportRegistryName(world, hex.EncodeToString(sum[:8]))
}

// Encode is r's bytes.
func (r ExportRegistration) Encode() []byte {
	data, _ := json.Marshal(r)
	return data
}

// ReadExportRegistrations lists the registrations in world's registry, in
// name order; World is filled in with world where the record leaves it
// out. A record that does not decode, names no table or base, or does not
// belong under its name is index.ErrCorrupt.
func ReadExportRegistrations(ctx context.Context, b bucket.Bucket, world string) ([]ExportRegistration, error) {
	var out []ExportRegistration
	for a, err := range b.List(ctx, index.ExportRegistryPrefix(world), "") {
		if err != nil {
			return nil, fmt.Errorf("listing the export registry %s: %w", index.ExportRegistryPrefix(world), err)
		}
		data, _, err := b.Get(ctx, a.Name)
		if err != nil {
			return nil, fmt.Errorf("export registry record %s: %w", a.Name, err)
		}
		var r ExportRegistration
		switch err := json.Unmarshal(data, &r); {
		case err != nil:
			return nil, fmt.Errorf("export registry record %s: not a registration (%v): %w", a.Name, err, index.ErrCorrupt)
		case r.Table == "" || r.Base == "":
			return nil, fmt.Errorf("export registry record %s: no table or no base URI: %w", a.Name, index.ErrCorrupt)
		case ExportRegistrationName(world, r.Table) != a.Name:
			return nil, fmt.Errorf("export registry record %s: names table %s, which is registered as %s: %w", a.Name, r.Table, ExportRegistrationName(world, r.Table), index.ErrCorrupt)
		}
		if r.World == "" {
			r.World = world
		}
		out = append(out, r)
	}
	return out, nil
}

// ExportRefs is the reference list of one metadata version of an exported
// table: every bucket object its live snapshots reference.
//
// Its bytes: exportRefsMagic; the table's location and the version
// (uvarint length and bytes, uvarint); the sha256 of the version's
// metadata bytes; the count of objects, then each object's name, in
// ascending order, as the length of the prefix it shares with the name
// before it and the rest (uvarints and bytes); last, the sha256 of all
// the bytes before it. A list that fails its sum, or that belongs to
// another table, version or metadata than the one read, is
// index.ErrCorrupt.
type ExportRefs struct {
	Table    string   // the table's location
	Version  int      // the metadata version (index.IcebergMetadataName)
	Metadata [32]byte // the sha256 of that version's bytes
	Objects  []string // ascending, unique
}

// exportRefsMagic begins a reference list's bytes (and versions them).
const exportRefsMagic = "worldfs export references 1\n"

// Name is where the list lives (index.IcebergRefsName).
func (r *ExportRefs) Name() string {
	return index.IcebergRefsName(r.Table, r.Version, hex.EncodeToString(r.Metadata[:16]))
}

// Encode is r's bytes; Objects are sorted and deduplicated first.
func (r *ExportRefs) Encode() []byte {
	slices.Sort(r.Objects)
	r.Objects = slices.Compact(r.Objects)
	out := []byte(exportRefsMagic)
	out = binary.AppendUvarint(out, uint64(len(r.Table)))
	out = append(out, r.Table...)
	out = binary.AppendUvarint(out, uint64(r.Version))
	out = append(out, r.Metadata[:]...)
	out = binary.AppendUvarint(out, uint64(len(r.Objects)))
	prev := ""
	for _, o := range r.Objects {
		n := 0
		for n < len(prev) && n < len(o) && prev[n] == o[n] {
			n++
		}
		out = binary.AppendUvarint(out, uint64(n))
		out = binary.AppendUvarint(out, uint64(len(o)-n))
		out = append(out, o[n:]...)
		prev = o
	}
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// DecodeExportRefs parses a reference list's bytes, checking its sum and
// the order of its names (index.ErrCorrupt otherwise). The caller checks
// that it is the list of the version it read (ExportRefs.Of).
func DecodeExportRefs(data []byte) (*ExportRefs, error) {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("export reference list: %s: %w", fmt.Sprintf(what, args...), index.ErrCorrupt)
	}
	if len(data) < len(exportRefsMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(exportRefsMagic)) {
		return nil, bad("not a reference list (%d bytes)", len(data))
	}
	body := data[:len(data)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, bad("its sha256 does not match its bytes")
	}
	rest := body[len(exportRefsMagic):]
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	take := func(n uint64) (string, bool) {
		if n > uint64(len(rest)) {
			return "", false
		}
		s := string(rest[:n])
		rest = rest[n:]
		return s, true
	}
	r := &ExportRefs{}
	n, ok := uvarint()
	if ok {
		r.Table, ok = take(n)
	}
	var v uint64
	if ok {
		v, ok = uvarint()
		r.Version = int(v)
	}
	if !ok || len(rest) < sha256.Size || v == 0 || v > 1<<31 {
		return nil, bad("a truncated header")
	}
	copy(r.Metadata[:], rest)
	rest = rest[sha256.Size:]
	count, ok := uvarint()
	if !ok || count > uint64(len(rest)) {
		return nil, bad("a truncated count")
	}
	r.Objects = make([]string, 0, count)
	prev := ""
	for i := range count {
		shared, ok1 := uvarint()
		size, ok2 := uvarint()
		suffix, ok3 := take(size)
		if !ok1 || !ok2 || !ok3 || shared > uint64(len(prev)) {
			return nil, bad("object %d of %d is truncated", i, count)
		}
		o := prev[:shared] + suffix
		if i > 0 && o <= prev {
			return nil, bad("object %q after %q: not in ascending order", o, prev)
		}
		r.Objects = append(r.Objects, o)
		prev = o
	}
	if len(rest) != 0 {
		return nil, bad("%d bytes after its objects", len(rest))
	}
	return r, nil
}

// Of reports whether r is the list of version v of the table at loc,
// whose metadata bytes have sha256 sum.
func (r *ExportRefs) Of(loc string, v int, sum [32]byte) bool {
	return r.Table == loc && r.Version == v && r.Metadata == sum
}

// ErrNoExportRefs: the latest metadata version of an exported table has
// no reference list (a worldfs before reference lists wrote it).
var ErrNoExportRefs = errors.New("no reference list")

// LatestExportVersion returns the newest metadata version of the table at
// loc (0: none committed yet), the highest listed.
func LatestExportVersion(ctx context.Context, b bucket.Bucket, loc string) (int, error) {
	best := 0
	for a, err := range b.List(ctx, index.IcebergMetadataPrefix(loc), "") {
		if err != nil {
			return 0, err
		}
		if n, ok := index.ParseIcebergMetadataName(loc, a.Name); ok {
			best = max(best, n)
		}
	}
	return best, nil
}

// ReadExportRefs reads the reference list of version v of the table at
// loc: the version's bytes, then the list named by their hash. A list
// that is missing is ErrNoExportRefs; one that is damaged or another
// version's is index.ErrCorrupt.
func ReadExportRefs(ctx context.Context, b bucket.Bucket, loc string, v int) (*ExportRefs, error) {
	meta := index.IcebergMetadataName(loc, v)
	data, _, err := b.Get(ctx, meta)
	if err != nil {
		return nil, fmt.Errorf("version v%d (%s): %w", v, meta, err)
	}
	return ReadExportRefsOf(ctx, b, loc, v, sha256.Sum256(data))
}

// ReadExportRefsOf is ReadExportRefs of a version whose bytes' sha256
// (sum) the caller read.
func ReadExportRefsOf(ctx context.Context, b bucket.Bucket, loc string, v int, sum [32]byte) (*ExportRefs, error) {
	want := &ExportRefs{Table: loc, Version: v, Metadata: sum}
	name := want.Name()
	data, _, err := b.Get(ctx, name)
	if errors.Is(err, bucket.ErrNotExist) {
		return nil, fmt.Errorf("version v%d has no reference list (%s): %w", v, name, ErrNoExportRefs)
	}
	if err != nil {
		return nil, fmt.Errorf("the reference list of version v%d (%s): %w", v, name, err)
	}
	r, err := DecodeExportRefs(data)
	if err != nil {
		return nil, fmt.Errorf("the reference list of version v%d (%s): %w", v, name, err)
	}
	if !r.Of(loc, v, sum) {
		return nil, fmt.Errorf("the reference list of version v%d (%s) is that of version v%d of %s: %w", v, name, r.Version, r.Table, index.ErrCorrupt)
	}
	return r, nil
}
