package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/ui"
)

func uiSpec(env Env) Bench {
	var url, world, run, dir *string
	var requests *int
	return benchSpec[*ui.BenchResult]{
		name: "ui",
		summary: "measure the web interface's server-side time per page and endpoint (first request, then median, p99 and max of repeats): " +
			"worlds, a run's timeline, rows per tick (the whole run and zoomed), older commit events, a tick's page and points, a scrubber step to the next tick, an entity's history, " +
			"two ticks compared (and a fork against its parent), a query, facts",
		example: "worldfs bench ui --bucket ./worldfs-data --world w1 --requests 50",
		flags: func(fs *flag.FlagSet) {
			url = env.BucketFlag(fs)
			world = fs.String("world", "", "world to measure (required)")
			run = fs.String("run", "main", "run")
			requests = fs.Int("requests", 30, "repeats of each request after the first")
			dir = fs.String("dir", "", "work directory for the views' fragment lists and caches (default: a temporary one, removed after)")
		},
		check: func(args []string) error {
			if len(args) != 0 || *world == "" || *requests < 1 {
				return usagef("bench ui takes no arguments, --world, and a positive --requests")
			}
			return nil
		},
		open: func(ctx context.Context) (bucket.Bucket, error) { return env.OpenExisting(ctx, *url) },
		run: func(ctx context.Context, b bucket.Bucket) (*ui.BenchResult, error) {
			d, remove, err := benchDir(*dir, "worldfs-bench-ui-")
			if err != nil {
				return nil, err
			}
			defer remove()
			opts, done, err := env.UIOptions(b, *url, d, 0)
			if err != nil {
				return nil, err
			}
			defer done()
			return ui.Bench(ctx, opts, *world, *run, *requests)
		},
		table: func(out io.Writer, res *ui.BenchResult) error {
			fmt.Fprintf(out, "world %s run %s: %d ticks, table %s, %d requests each after the first (server-side time, no network)\n",
				res.World, res.Run, res.Ticks, res.Table, res.Requests)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "endpoint\tfirst ms\tp50 ms\tp99 ms\tmax ms\tbytes\t")
			for _, e := range res.Steps {
				fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t\n", e.Name, e.FirstMs, e.P50ms, e.P99ms, e.MaxMs, e.Bytes)
			}
			return tw.Flush()
		},
	}.bench()
}
