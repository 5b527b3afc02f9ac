package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// tagCmd is "worldfs tag": it runs the root ctl's tag (or untag) command,
// as a write to <mount>/ctl would.
func tagCmd() command {
	var url, run, message *string
	var del, asJSON *bool
	return command{
		name: "tag",
		summary: "name a visible tick of a world (W@POINT NAME): a create-only catalog record every reader sees at once, " +
			"shown on the mount (runs/<run>/tags/NAME), in SQL (worldfs_tags, --at tag:NAME), the web interface and Iceberg exports (a tag ref, kept through --expire-before); " +
			"--delete W NAME deletes one. POINT is " + index.MomentForms,
		usage: "W@POINT NAME | --delete W NAME",
		example: "worldfs tag --bucket ./worldfs-data w1@170 fig3 --message \"the paper's figure 3\"\n" +
			"  worldfs sql --bucket ./worldfs-data --world w1 --at tag:fig3 \"SELECT count(*) FROM particle\"\n" +
			"  worldfs tag --bucket ./worldfs-data --delete w1 fig3",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			run = fs.String("run", index.DefaultRun, "the run whose tick the point names")
			message = fs.String("message", "", fmt.Sprintf("what the tag is for (at most %d bytes)", index.MaxTagMessage))
			del = fs.Bool("delete", false, "delete the tag NAME of world W (a record too: the name may be taken again)")
			asJSON = fs.Bool("json", false, "print the tag as one JSON object")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 2 {
				return usagef("tag takes W@POINT NAME, or --delete W NAME")
			}
			var line map[string]any
			world := args[0]
			if *del {
				if isSet(fs, "message") || isSet(fs, "run") {
					return usagef("--delete takes W NAME alone")
				}
				line = map[string]any{"op": "untag", "world": world, "name": args[1]}
			} else {
				w, point, ok := strings.Cut(args[0], "@")
				if !ok || w == "" || point == "" {
					return usagef("%q: the first argument is W@POINT, the world and the point tagged (w1@170, w1@head)", args[0])
				}
				if _, err := index.ParseMomentOrTag(point, time.Now()); err != nil {
					return usagef("%s: %v", args[0], err)
				}
				if err := index.ValidateTagName(args[1]); err != nil {
					return usagef("%v", err)
				}
				if len(*message) > index.MaxTagMessage {
					return usagef("--message is %d bytes, over the %d a tag's message may have", len(*message), index.MaxTagMessage)
				}
				world = w
				line = map[string]any{"op": "tag", "world": w, "run": *run, "at": point, "name": args[1], "message": *message}
			}
			b, err := openExisting(ctx, *url)
			if err != nil {
				return err
			}
			defer b.Close()
			if err := requireWorld(ctx, b, world); err != nil {
				return err
			}
			answer, err := ctlAnswer(ctx, b, *url, line)
			if err != nil {
				return err
			}
			tg, _ := answer.(index.Tag)
			if *asJSON {
				return writeJSON(out, tagRecord{World: world, Tag: tg})
			}
			if *del {
				_, err = fmt.Fprintf(out, "world %s: tag %s (run %s tick %d) deleted\n", world, tg.Name, tg.Run, tg.Tick)
				return err
			}
			_, err = fmt.Fprintf(out, "world %s: tag %s names run %s tick %d (commit %s)\n", world, tg.Name, tg.Run, tg.Tick, tg.CommitToken)
			return err
		},
	}
}

// tagRecord is a tag as worldfs tags --json and worldfs tag --json print
// it.
type tagRecord struct {
	World string `json:"world"`
	index.Tag
}

// tagsCmd is "worldfs tags".
func tagsCmd() command {
	var url *string
	var asJSON *bool
	return command{
		name:    "tags",
		summary: "list the tags of a world, or of every world: name, run, tick, commit, when, message",
		usage:   "[W]",
		example: "worldfs tags --bucket ./worldfs-data w1\n  worldfs tags --json",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			asJSON = fs.Bool("json", false, "print a JSON array")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) > 1 {
				return usagef("tags takes at most one world")
			}
			return withBucket(ctx, *url, func(b bucket.Bucket) error {
				var worlds []string
				if len(args) == 1 {
					if err := requireWorld(ctx, b, args[0]); err != nil {
						return err
					}
					worlds = args
				} else {
					markers, err := index.ListWorlds(ctx, b)
					if err != nil {
						return err
					}
					for _, m := range markers {
						worlds = append(worlds, m.ID)
					}
				}
				recs := []tagRecord{}
				for _, w := range worlds {
					tags, err := worldTags(ctx, b, w)
					if err != nil {
						return err
					}
					for _, t := range tags {
						recs = append(recs, tagRecord{World: w, Tag: t})
					}
				}
				if *asJSON {
					return writeJSON(out, recs)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "WORLD\tTAG\tRUN\tTICK\tCREATED\tMESSAGE")
				for _, r := range recs {
					msg, _ := json.Marshal(r.Message) // one line, quoted
					if r.Message == "" {
						msg = []byte("-")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.World, r.Name, r.Run, r.Tick,
						time.UnixMilli(r.CreatedUnixMs).UTC().Format(time.RFC3339), msg)
				}
				return tw.Flush()
			})
		},
	}
}

// worldTags reads world's tags: its newest checkpoint's and its log's
// after it, no tick of its history.
func worldTags(ctx context.Context, b bucket.Bucket, world string) ([]index.Tag, error) {
	p, _, err := index.LoadFor(ctx, b, world, index.Want{From: 1, To: 0})
	if err != nil {
		return nil, err
	}
	return p.Tags(), nil
}
