package iceberg

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	ice "github.com/apache/iceberg-go"

	"github.com/worldfs/worldfs/frame"
)

// icebergType maps a worldfs column type to its Iceberg type (the table is in
// docs/INTERNALS.md, "export/iceberg/").
func icebergType(t frame.Type) (ice.Type, error) {
	switch t {
	case frame.Float64:
		return ice.PrimitiveTypes.Float64, nil
	case frame.Float32:
		return ice.PrimitiveTypes.Float32, nil
	case frame.Int64:
		return ice.PrimitiveTypes.Int64, nil
	case frame.Int32:
		return ice.PrimitiveTypes.Int32, nil
	case frame.Bool:
		return ice.PrimitiveTypes.Bool, nil
	case frame.String:
		return ice.PrimitiveTypes.String, nil
	}
	return nil, fmt.Errorf("column type %q has no Iceberg type", t)
}

// schemaOf returns the Iceberg schema of t: entity_id, tick, the commit
// columns, then the component columns of every table id of the name, by
// name. A column keeps the field id it had in the previous metadata (ids
// are never reused; new columns get the next ones), and the previous
// schema's id when nothing changed. It also returns the last column id.
func schemaOf(prev *metadata, t *table) (*ice.Schema, int, error) {
	types := map[string]frame.Type{}
	var names []string
	for _, key := range slices.Sorted(maps.Keys(t.infos)) {
		for _, c := range t.infos[key].Columns {
			if old, ok := types[c.Name]; ok {
				if old != c.Type {
					return nil, 0, fmt.Errorf("column %s is %s in one schema and %s in another: one Iceberg table cannot hold both", c.Name, old, c.Type)
				}
				continue
			}
			types[c.Name] = c.Type
			names = append(names, c.Name)
		}
	}
	lead := []string{frame.ColEntity, frame.ColTick, frame.ColCommitToken, frame.ColWriterEpoch}
	slices.SortFunc(names, func(a, b string) int {
		ia, ib := slices.Index(lead, a), slices.Index(lead, b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
	ids := map[string]int{}
	last, schemaID := 0, 0
	var cur *ice.Schema
	if prev != nil {
		last = prev.LastColumnID
		for _, s := range prev.Schemas {
			for _, f := range s.Fields() {
				ids[f.Name] = f.ID
			}
			schemaID = max(schemaID, s.ID+1)
		}
		cur = prev.schema(prev.CurrentSchemaID)
	}
	fields := make([]ice.NestedField, 0, len(names))
	for _, n := range names {
		typ, err := icebergType(types[n])
		if err != nil {
			return nil, 0, fmt.Errorf("column %s: %w", n, err)
		}
		id, ok := ids[n]
		if !ok {
			last++
			id = last
		}
		fields = append(fields, ice.NestedField{ID: id, Name: n, Type: typ, Required: false})
	}
	if cur != nil && slices.EqualFunc(cur.Fields(), fields, func(a, b ice.NestedField) bool {
		return a.ID == b.ID && a.Name == b.Name && a.Type.Equals(b.Type)
	}) {
		return cur, last, nil
	}
	return ice.NewSchema(schemaID, fields...), last, nil
}

// fieldID is the id of the named field of sc (0: none).
func fieldID(sc *ice.Schema, name string) int {
	if f, ok := sc.FindFieldByName(name); ok {
		return f.ID
	}
	return 0
}

// nameMapping maps Parquet column names to field ids for files written
// without field ids (every worldfs fragment): the table property
// schema.name-mapping.default.
func nameMapping(schemas []*ice.Schema) string {
	type mapped struct {
		FieldID int      `json:"field-id"`
		Names   []string `json:"names"`
	}
	seen := map[int]bool{}
	var out []mapped
	for _, s := range schemas {
		for _, f := range s.Fields() {
			if !seen[f.ID] {
				seen[f.ID] = true
				out = append(out, mapped{FieldID: f.ID, Names: []string{f.Name}})
			}
		}
	}
	slices.SortFunc(out, func(a, b mapped) int { return a.FieldID - b.FieldID })
	data, _ := json.Marshal(out)
	return string(data)
}
