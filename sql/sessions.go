package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/worldfs/worldfs/cache"
)

// Sessions of several worlds (Join). Each world's script defines its
// objects in a schema named after the world instead of as temporary
// objects, so worlds that share table names (a fork and its parent) live
// side by side: d1.particle, "d1-fork".particle_at(170). The first
// world's schema is also the search path, so an unqualified name reads it
// as a one-world session does. Per world, the script is rewritten when
// the session opens:
//
//   - CREATE OR REPLACE TEMP becomes CREATE OR REPLACE, run with that
//     world's schema current, so every object lands in it;
//   - the variables it sets and reads (file lists) get the world's name
//     as a prefix, since variables are the session's;
//   - the functions worldfs serves per world (the compacted and visible
//     ticks) are registered under a name with the world's place;
//   - the names its macros refer to are qualified with the schema: a view
//     binds its body in its own schema, a macro where it is called
//     (markRef marks those references; a one-world session drops it).
//
// worldfs_diff(table, world_a, a, world_b, b) compares two (world, tick)
// points of one table, across the session's schemas.
const markRef = "\x11"

// diffFunc is the macro of a diff across worlds.
const diffFunc = "worldfs_diff"

// reservedSchemas are names a world's schema cannot take.
var reservedSchemas = []string{"main", "temp", "memory", "system", "pg_catalog", "information_schema"}

// Join returns one session of the views of several worlds (scripts, each
// of another world), for Open, Run and Export: each world's views in a
// schema named after the world, the first world's also unqualified, and
// worldfs_diff across them. A single script is returned as it is.
func Join(scripts ...*Script) (*Script, error) {
	if len(scripts) == 0 {
		return nil, errors.New("views of no world")
	}
	if len(scripts) == 1 {
		return scripts[0], nil
	}
	return join(scripts)
}

// join is Join of one or more scripts: always a session of parts.
func join(scripts []*Script) (*Script, error) {
	seen := map[string]bool{}
	for _, s := range scripts {
		if s.parts != nil {
			return nil, errors.New("views of several worlds join scripts of one world each")
		}
		if seen[s.World] {
			return nil, fmt.Errorf("world %s is named twice: a session holds each world once", s.World)
		}
		if slices.Contains(reservedSchemas, s.World) {
			return nil, fmt.Errorf("world %s cannot be a schema of a session of several worlds (DuckDB reserves the name); query it alone", s.World)
		}
		seen[s.World] = true
	}
	first := scripts[0]
	j := &Script{World: first.World, Run: first.Run, AtTick: first.AtTick, Views: first.Views, FragmentList: first.FragmentList, parts: scripts}
	j.checks = &checks{files: map[string]cache.Record{}}
	for _, s := range scripts {
		if s.checks == nil {
			continue
		}
		if j.checks.v == nil {
			j.checks.v = s.checks.v
		}
		for p, r := range s.checks.files {
			j.checks.files[p] = r
		}
		for p, err := range s.checks.lost {
			if j.checks.lost == nil {
				j.checks.lost = map[string]error{}
			}
			j.checks.lost[p] = err
		}
	}
	return j, nil
}

// Worlds returns the worlds of the session, the first first.
func (s *Script) Worlds() []string {
	if s.parts == nil {
		return []string{s.World}
	}
	var out []string
	for _, p := range s.parts {
		out = append(out, p.World)
	}
	return out
}

// ViewsOf returns the per-table views of world in the session s, by
// name (nil: world is not in it).
func (s *Script) ViewsOf(world string) []string {
	if s.parts == nil {
		if s.World == world {
			return s.Views
		}
		return nil
	}
	for _, p := range s.parts {
		if p.World == world {
			return p.Views
		}
	}
	return nil
}

// suffix is the name suffix of the functions worldfs serves for part i
// of a session.
func suffix(i int) string { return fmt.Sprintf("_%d", i) }

// namespaced rewrites text, the script of the session's part i (world
// p.World), to define its objects in the world's schema (see above).
func namespaced(p *Script, i int, text string) string {
	schema := ident(p.World)
	sfx := suffix(i)
	r := strings.NewReplacer(
		"CREATE OR REPLACE TEMP ", "CREATE OR REPLACE ",
		"getvariable('", "getvariable('"+p.World+"/",
		"SET VARIABLE \"", "SET VARIABLE \""+p.World+"/",
		markRef, schema+".",
		compactedFunc+"()", compactedFunc+sfx+"()",
		ticksFunc+"()", ticksFunc+sfx+"()",
		tickBeforeFunc+"(", tickBeforeFunc+sfx+"(",
		tickAtFunc+"(", tickAtFunc+sfx+"(",
	)
	return fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s;\nSET schema = %s;\n", schema, lit(schema)) + r.Replace(text)
}

// sessionText is the script of a session of several worlds: each part
// (its text given by part) in its schema, then the first world's schema
// as the search path, and worldfs_diff.
func (s *Script) sessionText(part func(p *Script) (string, error)) (string, error) {
	var sb strings.Builder
	for i, p := range s.parts {
		text, err := part(p)
		if err != nil {
			return "", err
		}
		sb.WriteString(namespaced(p, i, text))
	}
	fmt.Fprintf(&sb, "SET schema = 'main';\nSET search_path = %s;\n", lit(ident(s.parts[0].World)))
	sb.WriteString(diffMacroAcross())
	return sb.String(), nil
}

// diffMacroAcross defines worldfs_diff(tbl, wa, a, wb, b): the entities
// of table tbl that differ between tick a of world wa and tick b of world
// wb, as <table>_diff shows them within a world (each side read through
// its world's <table>_at; components compared with IS DISTINCT FROM).
// The names are quoted into the query each side runs, and the ticks cast
// to BIGINT, so no argument is read as SQL.
func diffMacroAcross() string {
	side := func(w, t string) string {
		return fmt.Sprintf(`'SELECT * EXCLUDE (tick) FROM "' || replace(%s, '"', '""') || '"."' || replace(tbl || '_at', '"', '""') || '"(' || %s::BIGINT || ')'`, w, t)
	}
	return fmt.Sprintf(`CREATE OR REPLACE TEMP MACRO %s(tbl, wa, a, wb, b) AS TABLE
  WITH x AS (FROM query(%s)), y AS (FROM query(%s)),
  j AS (SELECT x AS xr, y AS yr FROM x FULL OUTER JOIN y ON x.entity_id = y.entity_id WHERE x IS DISTINCT FROM y)
  SELECT change_type, entity_id, tick, * EXCLUDE (change_type, entity_id, tick, worldfs_side) FROM (
    SELECT CASE WHEN yr.entity_id IS NULL THEN 'delete' ELSE 'update_preimage' END AS change_type, a::BIGINT AS tick, 0 AS worldfs_side, unnest(xr) FROM j WHERE xr.entity_id IS NOT NULL
    UNION ALL BY NAME
    SELECT CASE WHEN xr.entity_id IS NULL THEN 'insert' ELSE 'update_postimage' END AS change_type, b::BIGINT AS tick, 1 AS worldfs_side, unnest(yr) FROM j WHERE yr.entity_id IS NOT NULL)
  ORDER BY entity_id, worldfs_side;
`, diffFunc, side("wa", "a"), side("wb", "b"))
}

// register makes the functions worldfs serves for s's views (each
// world's, in a session of several) available on db.
func (s *Script) register(ctx context.Context, db *sql.DB) error {
	if s.sweep {
		return s.registerSweepTicks(ctx, db)
	}
	parts := s.parts
	if parts == nil {
		parts = []*Script{s}
	}
	for i, p := range parts {
		sfx := ""
		if s.parts != nil {
			sfx = suffix(i)
		}
		if p.compacted != nil {
			if err := registerCompacted(ctx, db, p.compacted, compactedFunc+sfx); err != nil {
				return err
			}
		}
		if p.ticks != nil {
			if err := registerTicks(ctx, db, p.ticks, sfx); err != nil {
				return err
			}
		}
	}
	return nil
}

// runText is the SQL worldfs runs to define s's views.
func (s *Script) runText() string {
	if s.sweep {
		text, _ := s.sweepText(false) // only the printed form writes lists
		return text
	}
	if s.parts == nil {
		return strings.ReplaceAll(s.run, markRef, "")
	}
	text, _ := s.sessionText(func(p *Script) (string, error) { return p.run, nil })
	return text
}

// fragmentTables names the fragment list table of each world of s, with
// the directory of its lists.
func (s *Script) fragmentTables() (tables, dirs []string) {
	if s.parts == nil || s.sweep {
		for _, p := range append([]*Script{s}, s.parts...) {
			if d := filepath.Dir(p.FragmentList); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		return []string{"worldfs_fragments"}, dirs
	}
	for _, p := range s.parts {
		tables, dirs = append(tables, ident(p.World)+".worldfs_fragments"), append(dirs, filepath.Dir(p.FragmentList))
	}
	return tables, dirs
}
