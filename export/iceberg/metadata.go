package iceberg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	ice "github.com/apache/iceberg-go"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// metadata is an Iceberg table metadata file (format v2), as worldfs
// writes it: unpartitioned, unsorted, one schema per change of columns.
type metadata struct {
	FormatVersion      int               `json:"format-version"`
	TableUUID          string            `json:"table-uuid"`
	Location           string            `json:"location"`
	LastSequenceNumber int64             `json:"last-sequence-number"`
	LastUpdatedMs      int64             `json:"last-updated-ms"`
	LastColumnID       int               `json:"last-column-id"`
	CurrentSchemaID    int               `json:"current-schema-id"`
	Schemas            []*ice.Schema     `json:"schemas"`
	DefaultSpecID      int               `json:"default-spec-id"`
	PartitionSpecs     []partitionSpec   `json:"partition-specs"`
	LastPartitionID    int               `json:"last-partition-id"`
	DefaultSortOrderID int               `json:"default-sort-order-id"`
	SortOrders         []sortOrder       `json:"sort-orders"`
	Properties         map[string]string `json:"properties"`
	CurrentSnapshotID  *int64            `json:"current-snapshot-id,omitempty"`
	Refs               map[string]ref    `json:"refs"`
	Snapshots          []snapshot        `json:"snapshots"`
	SnapshotLog        []snapshotLog     `json:"snapshot-log"`
	MetadataLog        []metadataLog     `json:"metadata-log"`
}

type partitionSpec struct {
	SpecID int   `json:"spec-id"`
	Fields []any `json:"fields"`
}

type sortOrder struct {
	OrderID int   `json:"order-id"`
	Fields  []any `json:"fields"`
}

type ref struct {
	SnapshotID int64  `json:"snapshot-id"`
	Type       string `json:"type"`
}

type snapshot struct {
	SnapshotID       int64             `json:"snapshot-id"`
	ParentSnapshotID *int64            `json:"parent-snapshot-id,omitempty"`
	SequenceNumber   int64             `json:"sequence-number"`
	TimestampMs      int64             `json:"timestamp-ms"`
	ManifestList     string            `json:"manifest-list"`
	Summary          map[string]string `json:"summary"`
	SchemaID         int               `json:"schema-id"`
}

type snapshotLog struct {
	TimestampMs int64 `json:"timestamp-ms"`
	SnapshotID  int64 `json:"snapshot-id"`
}

type metadataLog struct {
	TimestampMs  int64  `json:"timestamp-ms"`
	MetadataFile string `json:"metadata-file"`
}

func (m *metadata) current() *snapshot {
	if m.CurrentSnapshotID == nil {
		return nil
	}
	for i := range m.Snapshots {
		if m.Snapshots[i].SnapshotID == *m.CurrentSnapshotID {
			return &m.Snapshots[i]
		}
	}
	return nil
}

func (m *metadata) schema(id int) *ice.Schema {
	for _, s := range m.Schemas {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// ErrCorrupt: an export's metadata cannot be read as worldfs wrote it. It
// matches index.ErrCorrupt: whatever reads it (collection above all) fails
// closed.
var ErrCorrupt = fmt.Errorf("iceberg export: %w", index.ErrCorrupt)

// metadataName is the object of version v of a table's metadata
// (index.IcebergMetadataName).
func metadataName(table string, v int) string { return index.IcebergMetadataName(table, v) }

// latest finds the newest metadata version of the table stored under
// object prefix table (0 and nil: none yet) and the sha256 of its bytes
// (which name its reference list). The commit of version v+1 is a
// create-only object, so the newest is the highest number listed.
func latest(ctx context.Context, b bucket.Bucket, table string) (int, *metadata, [32]byte, error) {
	best, err := frame.LatestExportVersion(ctx, b, table)
	if err != nil || best == 0 {
		return 0, nil, [32]byte{}, err
	}
	m, sum, err := readMetadata(ctx, b, metadataName(table, best))
	return best, m, sum, err
}

func readMetadata(ctx context.Context, b bucket.Bucket, name string) (*metadata, [32]byte, error) {
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, [32]byte{}, err
	}
	var m metadata
	if err := json.Unmarshal(data, &m); err != nil || m.FormatVersion != 2 || m.Location == "" {
		return nil, [32]byte{}, fmt.Errorf("%s: not format-v2 table metadata (%v): %w", name, err, ErrCorrupt)
	}
	if m.CurrentSnapshotID != nil && m.current() == nil {
		return nil, [32]byte{}, fmt.Errorf("%s: current snapshot %d is not among its snapshots: %w", name, *m.CurrentSnapshotID, ErrCorrupt)
	}
	return &m, sha256.Sum256(data), nil
}

// entry is one live data file of a snapshot, as its manifest holds it.
type entry struct {
	uri                 string
	rows, size          int64
	snapshot, seq, fseq int64
	file                ice.DataFile
	manifest            int // its manifest's position in the manifest list
}

// liveFiles reads the data files snapshot s holds (its manifests, minus
// deleted entries), by URI. objectOf maps a URI to its bucket object.
func liveFiles(ctx context.Context, b bucket.Bucket, s *snapshot, objectOf func(string) (string, error)) ([]ice.ManifestFile, map[string]entry, error) {
	manifests, err := manifestList(ctx, b, s, objectOf)
	if err != nil {
		return nil, nil, err
	}
	files := map[string]entry{}
	for i, mf := range manifests {
		es, err := readManifest(ctx, b, mf, objectOf)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range es {
			e.manifest = i
			files[e.uri] = e
		}
	}
	return manifests, files, nil
}

// manifestList reads the manifests snapshot s lists (not their entries).
func manifestList(ctx context.Context, b bucket.Bucket, s *snapshot, objectOf func(string) (string, error)) ([]ice.ManifestFile, error) {
	name, err := objectOf(s.ManifestList)
	if err != nil {
		return nil, err
	}
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: manifest list: %w", s.SnapshotID, err)
	}
	manifests, err := ice.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: manifest list %s: %v: %w", s.SnapshotID, name, err, ErrCorrupt)
	}
	return manifests, nil
}

func readManifest(ctx context.Context, b bucket.Bucket, mf ice.ManifestFile, objectOf func(string) (string, error)) ([]entry, error) {
	name, err := objectOf(mf.FilePath())
	if err != nil {
		return nil, err
	}
	data, _, err := b.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	es, err := ice.ReadManifest(mf, bytes.NewReader(data), true)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %v: %w", name, err, ErrCorrupt)
	}
	out := make([]entry, 0, len(es))
	for _, e := range es {
		df := e.DataFile()
		fseq := e.SequenceNum()
		if p := e.FileSequenceNum(); p != nil {
			fseq = *p
		}
		out = append(out, entry{uri: df.FilePath(), rows: df.Count(), size: df.FileSizeBytes(),
			snapshot: e.SnapshotID(), seq: e.SequenceNum(), fseq: fseq, file: df})
	}
	return out, nil
}

// put creates an object the export writes before its commit (a manifest,
// a manifest list, a filtered data file). Its name is decided by what it
// holds, so a name already taken was written by an earlier attempt of the
// same export (its Avro sync marker may differ): that object serves.
func put(ctx context.Context, b bucket.Bucket, name string, data []byte) (int64, error) {
	_, err := bucket.CreateOnce(ctx, b, name, data)
	if errors.Is(err, bucket.ErrExist) {
		a, serr := b.Stat(ctx, name)
		if serr != nil {
			return 0, serr
		}
		return a.Size, nil
	}
	if err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}
