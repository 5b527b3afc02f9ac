package index

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"unicode/utf8"
)

// Run parameters: a world's immutable key-value metadata (World.Meta),
// set by its world.create (WorldCreate.Meta) and never changed: the seed,
// the gravity, the sweep a run belongs to. Readers show them beside the
// world's record (worldfs world, world.json, worldfs_worlds in SQL, the
// web interface); a sweep groups by them.

// Bounds of a world's metadata.
const (
	// MaxMetaKeys bounds how many keys a world's metadata holds.
	MaxMetaKeys = 64
	// MaxMetaKeyLen bounds a key, MaxMetaValueLen a value, in bytes.
	MaxMetaKeyLen   = 64
	MaxMetaValueLen = 1024
	// MaxMetaBytes bounds the keys and values together, in bytes.
	MaxMetaBytes = 8192
)

// ValidateMeta checks a world's metadata: at most MaxMetaKeys keys, each
// 1 to MaxMetaKeyLen characters of [a-z0-9._-] starting with a letter
// (a name every reader can use as a column or a field), each value valid
// UTF-8 of at most MaxMetaValueLen bytes, MaxMetaBytes in all.
func ValidateMeta(meta map[string]string) error {
	if len(meta) > MaxMetaKeys {
		return fmt.Errorf("metadata of %d keys: a world holds at most %d", len(meta), MaxMetaKeys)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		v := meta[k]
		if err := validateMetaKey(k); err != nil {
			return err
		}
		if len(v) > MaxMetaValueLen {
			return fmt.Errorf("metadata %s: the value is %d bytes, over the %d a value may have", k, len(v), MaxMetaValueLen)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("metadata %s: the value is not UTF-8", k)
		}
		total += len(k) + len(v)
	}
	if total > MaxMetaBytes {
		return fmt.Errorf("metadata of %d bytes (keys and values): a world holds at most %d", total, MaxMetaBytes)
	}
	return nil
}

func validateMetaKey(k string) error {
	const rule = "a key is 1 to 64 characters of a-z 0-9 . _ -, starting with a letter"
	if k == "" || len(k) > MaxMetaKeyLen || !(k[0] >= 'a' && k[0] <= 'z') {
		return fmt.Errorf("metadata key %q: %s", k, rule)
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("metadata key %q: character %q is not allowed (%s)", k, r, rule)
		}
	}
	return nil
}

// Same reports whether w and o are the same record (World holds a map,
// so it is not comparable with ==).
func (w World) Same(o World) bool {
	m, n := w.Meta, o.Meta
	w.Meta, o.Meta = nil, nil
	return reflect.DeepEqual(w, o) && maps.Equal(m, n)
}

// metaOf is meta as a state holds it: nil when empty, else a copy.
func metaOf(meta map[string]string) map[string]string {
	if len(meta) == 0 {
		return nil
	}
	return maps.Clone(meta)
}
