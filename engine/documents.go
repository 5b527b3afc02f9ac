package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/frame"
	"github.com/worldfs/worldfs/index"
)

// FactDocument is a fact as JSON, the form the CLI and the mount's ctl file
// take:
//
//	{"producer": "sensor-1", "external_id": "evt-9", "table": "reading",
//	 "components": {"reading": {"value": 21.5, "unit": "C"}}}
//
// A field's type is the one the world's fact table of that name already
// has, else the one Types gives ("reading.count": "int64"), else inferred
// from JSON: numbers are doubles, strings strings, booleans booleans.
type FactDocument struct {
	Run        string                    `json:"run,omitempty"`
	Producer   string                    `json:"producer"`
	ExternalID string                    `json:"external_id"`
	Table      string                    `json:"table"`
	Components map[string]map[string]any `json:"components"`
	Types      map[string]Type           `json:"types,omitempty"`
}

// DecodeStrict decodes one JSON value into v (frame.DecodeStrict).
func DecodeStrict(data []byte, v any) error { return frame.DecodeStrict(data, v) }

// Fact resolves the document against world's fact tables in b. Its table
// must be one the world holds (declared at the world's creation, by
// DeclareFactTables, or by an ingestion that created it): another name is
// refused (ErrInvalid) with the world's fact tables named, so that a
// mistyped name never makes a table.
func (d FactDocument) Fact(ctx context.Context, b bucket.Bucket, world string) (Fact, error) {
	return d.fact(ctx, b, world, false)
}

// FactCreatingTable is Fact for a table the world may not hold yet: the
// document's components then declare it, ordered by name (a JSON object's
// keys have no order a decoder keeps), and its first ingestion records it
// (worldfs ingest --create-table; the ctl's "create_table": true).
func (d FactDocument) FactCreatingTable(ctx context.Context, b bucket.Bucket, world string) (Fact, error) {
	return d.fact(ctx, b, world, true)
}

func (d FactDocument) fact(ctx context.Context, b bucket.Bucket, world string, create bool) (Fact, error) {
	if d.Table == "" || len(d.Components) == 0 {
		return Fact{}, invalid(errors.New("a fact document needs a table and components"))
	}
	infos, err := tableInfos(ctx, b, world)
	if err != nil {
		return Fact{}, err
	}
	known, names := factColumnTypes(infos, d.Table)
	if !create && !slices.Contains(names, d.Table) {
		held := "it holds none"
		if len(names) > 0 {
			held = "its fact tables: " + strings.Join(names, ", ")
		}
		return Fact{}, invalid(fmt.Errorf("world %s has no fact table %q (%s); declare it when the world is created (\"fact\": true in its tables) or create it with this fact (worldfs ingest --create-table, the ctl's \"create_table\": true)", world, d.Table, held))
	}
	var comps []Component
	values := Values{}
	for cname, fields := range d.Components {
		var fs []Field
		for fname, v := range fields {
			if v == nil {
				return Fact{}, invalid(fmt.Errorf("component %s field %s is null; worldfs columns are not nullable", cname, fname))
			}
			col := cname + "_" + fname
			t, ok := d.Types[cname+"."+fname]
			if !ok {
				t, ok = known[col]
			}
			if !ok {
				switch v.(type) {
				case json.Number, float64:
					t = Float64
				case string:
					t = String
				case bool:
					t = Bool
				default:
					return Fact{}, invalid(fmt.Errorf("component %s field %s: %v is not a number, string or boolean", cname, fname, v))
				}
			}
			fs = append(fs, Field{Name: fname, Type: t})
			values[col] = v
		}
		slices.SortFunc(fs, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
		c, err := NewComponent(cname, fs...)
		if err != nil {
			return Fact{}, invalid(err)
		}
		comps = append(comps, c)
	}
	// A JSON object's keys have no order a decoder keeps: the components
	// go by name, as their fields do.
	slices.SortFunc(comps, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
	t, err := NewFactTable(d.Table, comps...)
	if err != nil {
		return Fact{}, invalid(err)
	}
	// The world's fact table of that name with these columns, in the
	// order it was declared in, if it has one.
	ts, err := adopt(world, infos, []*Table{t})
	if err != nil {
		return Fact{}, err
	}
	return Fact{Run: d.Run, Producer: d.Producer, ExternalID: d.ExternalID, Table: ts[0], Values: values}, nil
}

// factColumnTypes returns the column types of the fact tables named name
// that infos (a world's) describe, and the names of all its fact tables
// but the receipts', sorted.
func factColumnTypes(infos []TableInfo, name string) (map[string]Type, []string) {
	out := map[string]Type{}
	var names []string
	for _, ti := range infos {
		if !IsFactColumns(ti.Columns) || ti.Name == ReceiptTableName {
			continue
		}
		if !slices.Contains(names, ti.Name) {
			names = append(names, ti.Name)
		}
		if ti.Name != name {
			continue
		}
		for _, c := range ti.Columns {
			out[c.Name] = c.Type
		}
	}
	slices.Sort(names)
	return out, names
}

// DeclareFactTables records tables, fact tables (NewFactTable), as world's,
// so that facts may be ingested into them by name (FactDocument.Fact) and
// the world's views show them, empty, until the first fact. A table that
// is not a fact table, the receipts' table, or one named as an entity table
// of the world is refused before anything is written.
func DeclareFactTables(ctx context.Context, b bucket.Bucket, world string, tables ...*Table) error {
	for _, t := range tables {
		if !IsFactTable(t) {
			return invalid(fmt.Errorf("world %s: table %s is not a fact table (NewFactTable)", world, t.Name))
		}
		if t.Name == ReceiptTableName {
			return invalid(fmt.Errorf("world %s: table %s holds evaluation receipts, which only Evaluate records", world, t.Name))
		}
	}
	infos, err := tableInfos(ctx, b, world)
	if err != nil {
		return err
	}
	for _, ti := range infos {
		if !IsFactColumns(ti.Columns) && slices.ContainsFunc(tables, func(t *Table) bool { return t.Name == ti.Name }) {
			return invalid(fmt.Errorf("world %s: table %s is an entity table of the world; a fact table needs a name of its own", world, ti.Name))
		}
	}
	return registerTables(ctx, b, world, tables)
}

// EvaluationDocument is an evaluation as JSON, the form the CLI and the
// mount's ctl file take. The subject is pinned at tick At of Run (default
// the head) with Selector, unless Subject gives one pinned before (a retry
// must name the same subject). Outcomes are the grader's conclusions when
// the grader ran outside worldfs.
type EvaluationDocument struct {
	ID       string         `json:"id"`
	Run      string         `json:"run,omitempty"`
	At       *int64         `json:"at,omitempty"`
	Selector Selector       `json:"selector"`
	Subject  *Subject       `json:"subject,omitempty"`
	Contract GraderContract `json:"contract"`
	Outcomes []Outcome      `json:"outcomes,omitempty"`
}

// Evaluation pins the document's subject in s and returns the evaluation.
func (d EvaluationDocument) Evaluation(s *index.State) (Evaluation, error) {
	ev := Evaluation{ID: d.ID, Contract: d.Contract}
	if d.Subject != nil {
		ev.Subject = *d.Subject
		return ev, nil
	}
	run, at := d.Run, int64(-1)
	if run == "" {
		run = index.DefaultRun
	}
	if d.At != nil {
		at = *d.At
	}
	sub, err := PinSubject(s, run, at, d.Selector)
	if err != nil {
		return ev, invalid(err)
	}
	ev.Subject = sub
	return ev, nil
}
