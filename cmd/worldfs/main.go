// Command worldfs stores, browses and queries simulation worlds kept as
// Parquet fragments in an object-store bucket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/cache"
	"github.com/worldfs/worldfs/engine"
)

// command is one CLI command: its flags are parsed by run's FlagSet.
type command struct {
	name    string
	summary string
	usage   string // arguments after the flags
	example string
	run     func(ctx context.Context, fs *flag.FlagSet, args []string, out io.Writer) error
	flags   func(fs *flag.FlagSet)
}

// usageError is a mistake in the command line; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

var commands = map[string][]command{}

func register(group string, c command) { commands[group] = append(commands[group], c) }

const defaultBucket = "./worldfs-data"

// bucketFlag adds --bucket, defaulting to $WORLDFS_BUCKET or ./worldfs-data,
// and --bucket-timeout.
func bucketFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("WORLDFS_BUCKET")
	if def == "" {
		def = defaultBucket
	}
	timeoutFlag(fs)
	return fs.String("bucket", def, "bucket URL (env WORLDFS_BUCKET)")
}

// bucketTimeout is how long a bucket call waits for an answer: the
// --bucket-timeout of the command being run (every command that opens a
// bucket has it), else $WORLDFS_BUCKET_TIMEOUT, else 30s. timeoutErr is a
// bad $WORLDFS_BUCKET_TIMEOUT that no flag overrode.
var (
	bucketTimeout time.Duration
	timeoutErr    error
)

// timeoutFlag adds --bucket-timeout.
func timeoutFlag(fs *flag.FlagSet) {
	bucketTimeout, timeoutErr = bucket.DefaultTimeout, nil
	if env := os.Getenv("WORLDFS_BUCKET_TIMEOUT"); env != "" {
		if err := (timeoutValue{}).Set(env); err != nil {
			timeoutErr = usagef("WORLDFS_BUCKET_TIMEOUT: %v", err)
		}
	}
	fs.Var(timeoutValue{}, "bucket-timeout", "a bucket call waits this long for the bucket to answer, then the command fails with exit status 3 (`duration`, default 30s; env WORLDFS_BUCKET_TIMEOUT)")
}

// timeoutValue is --bucket-timeout: a positive duration.
type timeoutValue struct{}

func (timeoutValue) String() string { return bucket.DefaultTimeout.String() }

func (timeoutValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a positive duration (e.g. 30s, 2m)", s)
	}
	bucketTimeout, timeoutErr = d, nil
	return nil
}

func openBucket(ctx context.Context, url string) (bucket.Bucket, error) {
	if timeoutErr != nil {
		return nil, timeoutErr
	}
	return bucketurl.OpenWith(ctx, url, bucketurl.Options{Timeout: bucketTimeout})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// WORLDFS_CPUPROFILE=file profiles the whole command (benchmarks, the
	// mount) for go tool pprof.
	if path := os.Getenv("WORLDFS_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code: 0 success, 1 a
// failed command, 2 a bad command line, 3 the bucket did not answer. Errors
// map to exit codes only here.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	var noReply *bucket.NotAnsweringError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "worldfs:", err)
		fmt.Fprintln(stderr, "Run 'worldfs --help' for usage.")
		return 2
	case errors.As(err, &noReply):
		fmt.Fprintln(stderr, "worldfs:", notAnsweringLine(err, noReply))
		return 3
	case errors.Is(err, cache.ErrCorruptFragment):
		fmt.Fprintln(stderr, "worldfs:", err)
		fmt.Fprintln(stderr, "worldfs: the bucket's data differs from the catalog; 'worldfs check --world W --read-data' lists every damaged fragment.")
		return 1
	default:
		fmt.Fprintln(stderr, "worldfs:", err)
		return 1
	}
}

// notAnsweringLine is the one line a user sees when the bucket stopped
// answering: which bucket, how long a call waited on what, and whether a
// write of this command is left in doubt (an unresolved create, or a tick
// whose publish could not be reconciled).
func notAnsweringLine(err error, noReply *bucket.NotAnsweringError) string {
	if errors.Is(err, bucket.ErrAmbiguous) || errors.Is(err, engine.ErrFrozen) {
		return noReply.Error() + "; whether this command's last write was committed is unknown until the bucket answers: look before repeating it"
	}
	return noReply.Error() + "; nothing was committed by the call that got no reply, and no write is in doubt"
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		topUsage(stdout)
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	// A command is either "name" (group "") or "group name".
	if cs, ok := commands[args[0]]; ok && args[0] != "" {
		if len(args) < 2 || isHelp(args[1]) {
			groupUsage(stdout, args[0], cs)
			if len(args) < 2 {
				return usagef("%s: no subcommand given", args[0])
			}
			return nil
		}
		for _, c := range cs {
			if c.name == args[1] {
				return runCommand(ctx, args[0]+" "+c.name, c, args[2:], stdout, stderr)
			}
		}
		return usagef("%s: unknown subcommand %q", args[0], args[1])
	}
	for _, c := range commands[""] {
		if c.name == args[0] {
			return runCommand(ctx, c.name, c, args[1:], stdout, stderr)
		}
	}
	return usagef("unknown command %q", args[0])
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

func runCommand(ctx context.Context, full string, c command, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(full, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: worldfs %s [flags] %s\n\n%s\n\nFlags:\n", full, c.usage, c.summary)
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
		if strings.Contains(full, "bucket") || fs.Lookup("bucket") != nil {
			fmt.Fprintf(w, "\n%s\n", bucketurl.Help)
		}
	}
	// Accept flags after positional arguments too ("ls PREFIX --bucket X").
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return c.run(ctx, fs, positional, stdout)
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, `worldfs keeps simulation worlds as Parquet fragments in an object-store bucket.

Usage: worldfs COMMAND [flags]    (every command takes --help)

Exit status: 0 done, 1 failed, 2 bad command line, 3 the bucket did not
answer within --bucket-timeout (the message says whether a write is in doubt).

Commands:`)
	groups := make([]string, 0, len(commands))
	for g := range commands {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, c := range commands[g] {
			name := strings.TrimSpace(g + " " + c.name)
			fmt.Fprintf(w, "  %-16s %s\n", name, c.summary)
		}
	}
}

func groupUsage(w io.Writer, group string, cs []command) {
	fmt.Fprintf(w, "Usage: worldfs %s SUBCOMMAND [flags]\n\nSubcommands:\n", group)
	for _, c := range cs {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
