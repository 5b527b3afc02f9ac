package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/internal/progress"
	"github.com/worldfs/worldfs/transfer"
)

// worldCopyCmd is "worldfs world copy".
func worldCopyCmd() command {
	var from, to *string
	var all, withLineage, asJSON *bool
	return command{
		name: "copy",
		summary: "copy a world (its catalog, fragments, referenced assets) to another bucket of any kind; every fragment is checked against " +
			"the catalog's sha256 as it is copied; run again after an interruption, it skips what the destination already holds",
		usage: "WORLD... | --all",
		example: "worldfs world copy w1 --bucket ./worldfs-data --to gs://my-bucket/worlds\n" +
			"  worldfs world copy w1-fork --to ./backup --with-lineage   # the fork and the parent whose history it reads\n" +
			"  worldfs world copy --all --bucket gs://a/worlds --to gs://b/worlds",
		flags: func(fs *flag.FlagSet) {
			from = bucketFlag(fs)
			fs.Lookup("bucket").Usage = "the bucket `URL` to copy from, as every command's --bucket (env WORLDFS_BUCKET)"
			fs.StringVar(from, "from", *from, "the bucket `URL` to copy from: --bucket's older name, the same flag")
			to = fs.String("to", "", "the bucket `URL` to copy into (required; a local directory is made)")
			all = fs.Bool("all", false, "copy every world of the source")
			withLineage = fs.Bool("with-lineage", false, "copy with a fork the worlds whose history it reads (its parent, and theirs)")
			asJSON = fs.Bool("json", false, "print the summary as one JSON object")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			switch {
			case isSet(fs, "bucket") && isSet(fs, "from"):
				return usagef("--bucket and --from both name the bucket to copy from (--from is --bucket's older name): give one")
			case *to == "":
				return usagef("--to is required")
			case *to == *from:
				return usagef("--to names the bucket copied from")
			case *all && len(args) > 0:
				return usagef("give worlds or --all, not both")
			case !*all && len(args) == 0:
				return usagef("name the worlds to copy, or --all")
			}
			src, err := openExisting(ctx, *from)
			if err != nil {
				return err
			}
			defer src.Close()
			worlds, err := copiedWorlds(ctx, src, *from, args, *all)
			if err != nil {
				return err
			}
			dst, err := openBucket(ctx, *to)
			if err != nil {
				return err
			}
			defer dst.Close()
			p := progress.New(os.Stderr)
			res, err := transfer.Copy(ctx, src, dst, worlds, transfer.Options{
				WithLineage: *withLineage,
				Progress:    func(pr transfer.Progress) { p.Step("objects copied or found there", pr.Objects, pr.TotalObjects) },
			})
			p.Done()
			var mp *transfer.MissingParentError
			if errors.As(err, &mp) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			return printCopied(out, res, *from, *to, *asJSON)
		},
	}
}

// copiedWorlds are the worlds world copy copies: those named (each must
// be in src), or every world of src with all.
func copiedWorlds(ctx context.Context, src bucket.Bucket, from string, named []string, all bool) ([]string, error) {
	worlds := named
	if all {
		var err error
		if worlds, err = transfer.Worlds(ctx, src); err != nil {
			return nil, err
		}
		if len(worlds) == 0 {
			return nil, notFoundError{fmt.Sprintf("bucket %s holds no world", from)}
		}
	}
	for _, w := range worlds {
		if err := requireWorld(ctx, src, w); err != nil {
			return nil, err
		}
	}
	return worlds, nil
}

// printCopied prints world copy's summary, a line or a JSON object.
func printCopied(out io.Writer, res transfer.Result, from, to string, asJSON bool) error {
	if asJSON {
		return writeJSON(out, map[string]any{"worlds": res.Worlds, "parents_there": res.Present, "copied": res.Copied, "skipped": res.Skipped,
			"bytes": res.Bytes, "verified": res.Verified, "from": from, "to": to})
	}
	fmt.Fprintf(out, "copied %s from %s to %s: %d objects copied (%.1f MiB), %d already there with the same bytes; "+
		"%d fragments checked against the catalog's sha256",
		strings.Join(res.Worlds, ", "), from, to, res.Copied, float64(res.Bytes)/(1<<20), res.Skipped, res.Verified)
	if len(res.Present) > 0 {
		fmt.Fprintf(out, "; the history it reads of %s was there already", strings.Join(res.Present, ", "))
	}
	_, err := fmt.Fprintln(out)
	return err
}
