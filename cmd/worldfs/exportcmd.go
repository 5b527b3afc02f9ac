package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/worldfs/worldfs/export/iceberg"
	"github.com/worldfs/worldfs/index"
)

// exportIcebergCmd is "worldfs export iceberg".
func exportIcebergCmd() command {
	var url, world, run, at, until, token, to, base, expire *string
	var asJSON, full *bool
	var follow *time.Duration
	return command{
		name: "iceberg",
		summary: "write a pinned snapshot of a run as Apache Iceberg tables (format v2) over the visible files in place, " +
			"incrementally; or expire old export snapshots",
		example: "worldfs export iceberg --bucket ./worldfs-data --world w1 --run main   # then: duckdb -c \"SELECT count(*) FROM iceberg_scan('<printed metadata>')\"",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			world = fs.String("world", "", "world to export (required)")
			run = fs.String("run", index.DefaultRun, "run to export")
			until = fs.String("until", "", "export the history up to this `POINT` (default: the head): "+index.MomentForms+"; "+localZone())
			at = fs.String("at", "", "the older spelling of --until: the history up to this `POINT` (an Iceberg table holds every tick up to it)")
			token = fs.String("token", "", "export the history up to the tick this commit `token` published")
			to = fs.String("to", "", "object prefix of the tables (default export/iceberg/<world>/<run>)")
			base = fs.String("base", "", "URI of the bucket's root in the metadata (default: file://<dir>/ or gs://<bucket>/<prefix>)")
			expire = fs.String("expire-before", "", "instead of exporting, drop the export snapshots older than this "+
				"(an RFC 3339 time, or a duration before now such as 168h; 0s: all), but each table's current one and those a tag of the world names "+
				"(worldfs tag: an Iceberg tag ref, until the tag is deleted and an export follows); collection then stops keeping their files")
			follow = fs.Duration("follow", 0, "keep exporting the head, within this long of each change the world's change feed shows (e.g. 10s), until interrupted")
			full = fs.Bool("full", false, "plan every table in full (read its previous manifests, check every file against the catalog) "+
				"instead of appending the files of the ticks since its previous snapshot")
			asJSON = fs.Bool("json", false, "print the result as JSON (with --follow, one line per export)")
		},
		run: func(ctx context.Context, _ *flag.FlagSet, _ []string, out io.Writer) error {
			if *world == "" {
				return usagef("--world is required")
			}
			opts := iceberg.Options{World: *world, Run: *run, Token: *token, Prefix: *to, Base: *base, Full: *full}
			m, before, err := exportPin(*until, *at, *token, *expire)
			if err != nil {
				return err
			}
			b, err := openBucket(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			if m != nil {
				if opts.Run == "" {
					opts.Run = index.DefaultRun
				}
				t, err := tickOf(ctx, b, *world, opts.Run, *m)
				if err != nil {
					return err
				}
				opts.AtTick = &t
			}
			if *expire != "" {
				res, err := iceberg.Expire(ctx, b, opts, before)
				if err != nil {
					return err
				}
				return printExpired(out, res, *asJSON)
			}
			enc := json.NewEncoder(out)
			report := func(res *iceberg.Result) error {
				if *asJSON {
					return enc.Encode(res)
				}
				printExport(out, res)
				return nil
			}
			if *follow != 0 {
				if *follow < 0 || opts.AtTick != nil || *token != "" {
					return usagef("--follow %v: give a positive interval and no --until or --token", *follow)
				}
				return iceberg.Follow(ctx, b, opts, *follow, func(res *iceberg.Result) { _ = report(res) })
			}
			res, err := iceberg.Export(ctx, b, opts)
			if err != nil {
				return err
			}
			return report(res)
		},
	}
}

// exportPin checks the flags that pin an export (--until or its older
// spelling --at, --token) or expire its snapshots (--expire-before, then
// returned as a time): one of them at most.
func exportPin(until, at, token, expire string) (m *index.Moment, before time.Time, err error) {
	if until != "" && at != "" {
		return nil, before, usagef("--at is the older spelling of --until: give one")
	}
	flagName, point := "until", until
	if at != "" {
		flagName, point = "at", at
	}
	if m, err = parsePointFlag(flagName, point); err != nil {
		return nil, before, err
	}
	if m != nil && token != "" {
		return nil, before, usagef("--%s and --token both pin the export: give one", flagName)
	}
	if expire != "" {
		if m != nil || token != "" {
			return nil, before, usagef("--expire-before expires snapshots; it takes no --until or --token")
		}
		if before, err = expireBefore(expire); err != nil {
			return nil, before, err
		}
	}
	return m, before, nil
}

// expireBefore is --expire-before: an RFC 3339 time, or a duration
// before now (0s: every snapshot but the current ones and those a tag
// names).
func expireBefore(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--expire-before %q: neither an RFC 3339 time (2026-11-30T12:00:00Z) nor a duration before now (168h; 0s: all but the current and the tagged)", s)
}

// printExpired prints what --expire-before dropped: a line per table, or
// one JSON array.
func printExpired(out io.Writer, res []iceberg.Expired, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	for _, e := range res {
		fmt.Fprintf(out, "%s: %d snapshots expired, %d kept", e.Table, e.Removed, e.Kept)
		if e.Metadata != "" {
			fmt.Fprintf(out, " (%s)", e.Metadata)
		}
		fmt.Fprintln(out)
	}
	return nil
}

func printExport(out io.Writer, res *iceberg.Result) {
	fmt.Fprintf(out, "world %s run %s at tick %d (token %s):\n", res.World, res.Run, res.Tick, res.Token)
	for _, t := range res.Tables {
		what := t.Operation
		if what == "" {
			what = "unchanged"
		}
		plan := "full"
		if t.Incremental {
			plan = "incremental"
		}
		fmt.Fprintf(out, "  %s: %s (%s), %d files (+%d -%d, %d rewritten filtered, %d reused), %d rows\n    %s\n",
			t.Table, what, plan, t.Files, t.Added, t.Removed, t.Rewritten, t.Reused, t.Rows, t.Metadata)
		for _, name := range slices.Sorted(maps.Keys(t.Tags)) {
			fmt.Fprintf(out, "    tag %s: snapshot %d\n", name, t.Tags[name])
		}
	}
}
