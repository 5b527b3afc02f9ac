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

// Fact resolves the document against world's fact tables in b.
func (d FactDocument) Fact(ctx context.Context, b bucket.Bucket, world string) (Fact, error) {
	if d.Table == "" || len(d.Components) == 0 {
		return Fact{}, invalid(errors.New("a fact document needs a table and components"))
	}
	known, err := factColumnTypes(ctx, b, world, d.Table)
	if err != nil {
		return Fact{}, err
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
	if t, err = describedAs(ctx, b, world, t); err != nil {
		return Fact{}, err
	}
	return Fact{Run: d.Run, Producer: d.Producer, ExternalID: d.ExternalID, Table: t, Values: values}, nil
}

// describedAs returns the table world describes with t's name and
// columns (in whatever order), else t.
func describedAs(ctx context.Context, b bucket.Bucket, world string, t *Table) (*Table, error) {
	ts, err := adoptTables(ctx, b, world, []*Table{t})
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

// factColumnTypes returns the column types of world's existing fact tables
// named name.
func factColumnTypes(ctx context.Context, b bucket.Bucket, world, name string) (map[string]Type, error) {
	out := map[string]Type{}
	ids, err := frame.TableIDs(ctx, b, world)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		ti, err := frame.ReadTableInfo(ctx, b, world, id)
		if err != nil {
			return nil, err
		}
		if ti.Name != name || !IsFactColumns(ti.Columns) {
			continue
		}
		for _, c := range ti.Columns {
			out[c.Name] = c.Type
		}
	}
	return out, nil
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
