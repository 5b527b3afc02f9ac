package sql

import (
	"fmt"
	"strings"

	"github.com/worldfs/worldfs/index"
)

// tagsView defines worldfs_tags: a row per tag of world (index.Tag), by
// name; empty, of its columns, when it has none.
func tagsView(world string, tags []index.Tag) string {
	if len(tags) == 0 {
		return "CREATE OR REPLACE TEMP VIEW worldfs_tags AS SELECT NULL::VARCHAR AS world, NULL::VARCHAR AS name, NULL::VARCHAR AS run, NULL::BIGINT AS tick, " +
			"NULL::VARCHAR AS commit_token, NULL::VARCHAR AS message, NULL::TIMESTAMPTZ AS created_at WHERE false;\n"
	}
	rows := make([]string, 0, len(tags))
	for _, t := range tags {
		rows = append(rows, fmt.Sprintf("(%s, %s, %s, %d, %s, %s, %d)", lit(world), lit(t.Name), lit(t.Run), t.Tick, lit(t.CommitToken), lit(t.Message), t.CreatedUnixMs))
	}
	return fmt.Sprintf("CREATE OR REPLACE TEMP VIEW worldfs_tags AS SELECT world::VARCHAR AS world, name::VARCHAR AS name, run::VARCHAR AS run, tick::BIGINT AS tick, "+
		"commit_token::VARCHAR AS commit_token, message::VARCHAR AS message, TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_milliseconds(created_ms::BIGINT) AS created_at\n"+
		"  FROM (VALUES %s) t(world, name, run, tick, commit_token, message, created_ms);\n", strings.Join(rows, ", "))
}

// resolveTag resolves tag name of p's world among p's visible ticks
// (rows): the tick it names, if it is of p's run and visible there under
// its token.
func (p *Script) resolveTag(name string, rows []tickRow) (int64, error) {
	for _, t := range p.Tags {
		if t.Name != name {
			continue
		}
		if t.Run != p.Run {
			return 0, fmt.Errorf("tag %s of world %s names run %s, not run %s: %w", name, p.World, t.Run, p.Run, ErrNotFound)
		}
		for _, r := range rows {
			if r.Tick == t.Tick && r.CommitToken == t.CommitToken {
				return t.Tick, nil
			}
		}
		return 0, fmt.Errorf("tag %s of world %s names tick %d of run %s, which the views do not show: %w", name, p.World, t.Tick, p.Run, ErrNotFound)
	}
	names := make([]string, 0, len(p.Tags))
	for _, t := range p.Tags {
		names = append(names, t.Name)
	}
	has := "it has no tag"
	if len(names) > 0 {
		has = "its tags: " + strings.Join(names, ", ")
	}
	return 0, fmt.Errorf("world %s has no tag %s (%s): %w", p.World, name, has, index.ErrNoTag)
}
