package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"

	"github.com/worldfs/worldfs/bench"
)

// benchCommands are "worldfs bench …": every benchmark package bench
// lists, taking --bucket as every command does.
func benchCommands() []command {
	env := bench.Env{
		BucketFlag:   bucketFlag,
		OpenBucket:   openBucket,
		OpenExisting: openExisting,
		RequireWorld: requireWorld,
		UIOptions:    uiOptions,
	}
	var cs []command
	for _, b := range bench.All(env) {
		cs = append(cs, benchCommand(b))
	}
	return cs
}

// benchCommand is "worldfs bench <b.Name>": a benchmark's mistake in the
// command line is a usage error (exit 2, with the help).
func benchCommand(b bench.Bench) command {
	var run bench.Run
	return command{
		name:    b.Name,
		summary: b.Summary,
		example: b.Example,
		flags:   func(fs *flag.FlagSet) { run = b.Flags(fs) },
		run: func(ctx context.Context, _ *flag.FlagSet, args []string, out io.Writer) error {
			err := run(ctx, args, out)
			if errors.As(err, new(bench.UsageError)) {
				return usageError{msg: err.Error()}
			}
			return err
		},
	}
}

// writeJSON prints v as one indented JSON object.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
