package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/worldfs/worldfs/bucket"
)

// bucketLsCmd is "worldfs bucket ls".
func bucketLsCmd() command {
	var url *string
	var after *string
	return command{
		name: "ls", summary: "list objects under a prefix, in name order", usage: "[PREFIX]",
		example: "worldfs bucket ls --bucket ./worldfs-data worlds/",
		flags: func(fs *flag.FlagSet) {
			url = bucketFlag(fs)
			after = fs.String("after", "", "list only names after this one")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) > 1 {
				return usagef("bucket ls takes at most one PREFIX")
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			return withBucket(ctx, *url, func(b bucket.Bucket) error {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "SIZE\tGENERATION\tCREATED\t NAME")
				for a, err := range b.List(ctx, prefix, *after) {
					if err != nil {
						tw.Flush()
						return err
					}
					fmt.Fprintf(tw, "%d\t%d\t%s\t %s\n", a.Size, a.Generation, a.Created.UTC().Format(time.RFC3339), a.Name)
				}
				return tw.Flush()
			})
		},
	}
}

// bucketCatCmd is "worldfs bucket cat".
func bucketCatCmd() command {
	var catURL *string
	var offset, length *int64
	return command{
		name: "cat", summary: "write an object's bytes (or a range) to stdout", usage: "NAME",
		example: "worldfs bucket cat --bucket ./worldfs-data --offset 0 --length 64 worlds/w1/marker.json",
		flags: func(fs *flag.FlagSet) {
			catURL = bucketFlag(fs)
			offset = fs.Int64("offset", 0, "first byte to read")
			length = fs.Int64("length", -1, "bytes to read (-1: to the end)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 1 {
				return usagef("bucket cat takes exactly one NAME")
			}
			return withBucket(ctx, *catURL, func(b bucket.Bucket) error {
				data, err := b.GetRange(ctx, args[0], *offset, *length)
				if err != nil {
					return err
				}
				_, err = out.Write(data)
				return err
			})
		},
	}
}

// bucketStatCmd is "worldfs bucket stat".
func bucketStatCmd() command {
	var statURL *string
	return command{
		name: "stat", summary: "show an object's size, generation and creation time", usage: "NAME",
		example: "worldfs bucket stat --bucket gs://my-bucket/worlds worlds/w1/marker.json",
		flags:   func(fs *flag.FlagSet) { statURL = bucketFlag(fs) },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 1 {
				return usagef("bucket stat takes exactly one NAME")
			}
			return withBucket(ctx, *statURL, func(b bucket.Bucket) error {
				a, err := b.Stat(ctx, args[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "name:       %s\nsize:       %d\ngeneration: %d\ncreated:    %s\n",
					a.Name, a.Size, a.Generation, a.Created.UTC().Format(time.RFC3339Nano))
				return err
			})
		},
	}
}

// bucketPutCmd is "worldfs bucket put".
func bucketPutCmd() command {
	var putURL *string
	return command{
		name: "put", summary: "create an object from a file or stdin, only if the name is free", usage: "NAME [FILE|-]",
		example: "echo hello | worldfs bucket put --bucket ./worldfs-data notes/hello.txt -",
		flags:   func(fs *flag.FlagSet) { putURL = bucketFlag(fs) },
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("bucket put takes NAME and an optional FILE (default: stdin)")
			}
			var data []byte
			var err error
			if len(args) == 1 || args[1] == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(args[1])
			}
			if err != nil {
				return err
			}
			b, err := openBucket(ctx, *putURL)
			if err != nil {
				return err
			}
			defer b.Close()
			a, err := bucket.CreateOnce(ctx, b, args[0], data)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "created %s (%d bytes, generation %d)\n", a.Name, a.Size, a.Generation)
			return nil
		},
	}
}

// bucketRmCmd is "worldfs bucket rm".
func bucketRmCmd() command {
	var rmURL *string
	var gen *int64
	return command{
		name: "rm", summary: "delete an object at the generation you read (maintenance only)", usage: "NAME",
		example: "worldfs bucket rm --bucket ./worldfs-data --generation 1764467222000000000 notes/hello.txt",
		flags: func(fs *flag.FlagSet) {
			rmURL = bucketFlag(fs)
			gen = fs.Int64("generation", 0, "the generation to delete, from 'bucket stat' (required)")
		},
		run: func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error {
			if len(args) != 1 {
				return usagef("bucket rm takes exactly one NAME")
			}
			if *gen <= 0 {
				return usagef("bucket rm needs --generation (see 'worldfs bucket stat NAME')")
			}
			return withBucket(ctx, *rmURL, func(b bucket.Bucket) error {
				if err := bucket.DeleteOnce(ctx, b, args[0], *gen); err != nil {
					return err
				}
				_, err := fmt.Fprintf(out, "deleted %s at generation %d\n", args[0], *gen)
				return err
			})
		},
	}
}
