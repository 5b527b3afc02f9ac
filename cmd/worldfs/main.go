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
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/bucketurl"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/internal/failpoint"
	wsql "github.com/worldfs/worldfs/sql"
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

// usageError is a mistake in the command line; it exits 2. It prints as
// one line that names the command and points to its --help (cmd, set by
// runCommand); usage, if set, is help to print in full after the
// message instead (worldfs alone, a group without its subcommand).
type usageError struct {
	msg   string
	usage string
	cmd   string
}

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// notFoundError: the bucket, world or object the command reads does not
// exist; it exits 4.
type notFoundError struct{ msg string }

func (e notFoundError) Error() string { return e.msg }

// Exit statuses: the one list, documented in README "Exit status" and in
// the top-level help.
const (
	exitFailed      = 1   // anything else
	exitUsage       = 2   // a bad command line
	exitInDoubt     = 3   // the bucket did not answer within --bucket-timeout, or a write's outcome is in doubt
	exitNotFound    = 4   // the bucket, world or object does not exist
	exitConflict    = 5   // a stale writer, or a conflict: the name, tick, fact or tag is taken
	exitResync      = 6   // watch: the cursor is past the change feed's retention
	exitInterrupted = 130 // interrupted (SIGINT, SIGTERM)
)

// commands is every command, by group ("": the top-level ones), each
// group in the order its help lists it: the one table of the CLI.
var commands = map[string][]command{
	"": {
		checkCmd(), demoCmd(), diffCmd(), evaluateCmd(), gcCmd(), ingestCmd(),
		initCmd(), logCmd(), mountCmd(), optimizeCmd(), serveCmd(), sqlCmd(), uiCmd(),
		tagCmd(), tagsCmd(), umountCmd(), versionCmd(), viewsCmd(), watchCmd(), worldsCmd(),
	},
	"bucket": {bucketLsCmd(), bucketCatCmd(), bucketStatCmd(), bucketPutCmd(), bucketRmCmd()},
	"world":  append([]command{worldCopyCmd()}, worldCommands()...),
	"export": {exportIcebergCmd()},
	"bench":  benchCommands(),
}

// groupSummaries describe the command groups on the top-level help's one
// line per group.
var groupSummaries = map[string]string{
	"bench":  "benchmarks, each printing its numbers (--json for one object)",
	"bucket": "read and write a bucket's objects directly",
	"export": "export a world's visible rows for other engines (Iceberg tables over the files in place)",
	"world":  "create, fork, resume a world and set its status or writer mode, without a mount; copy worlds to another bucket",
}

const defaultBucket = "./worldfs-data"

// bucketFlag adds --bucket, defaulting to $WORLDFS_BUCKET or ./worldfs-data,
// and --bucket-timeout.
func bucketFlag(fs *flag.FlagSet) *string {
	def := envOr("WORLDFS_BUCKET", defaultBucket)
	timeoutFlag(fs)
	return fs.String("bucket", def, "bucket `URL` (env WORLDFS_BUCKET)")
}

// envOr returns the environment variable name, or def if it is unset or
// empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// openBucket opens the bucket at url for a command that may write to it.
// Opening makes nothing: a local bucket's directory is made by its first
// write.
func openBucket(ctx context.Context, url string) (bucket.Bucket, error) {
	if timeoutErr != nil {
		return nil, timeoutErr
	}
	return bucketurl.OpenWith(ctx, url, bucketurl.Options{Timeout: bucketTimeout})
}

// openExisting opens the bucket at url for a command that reads it: a
// local bucket whose directory is missing is a notFoundError, and nothing
// is made.
func openExisting(ctx context.Context, url string) (bucket.Bucket, error) {
	b, err := openBucket(ctx, url)
	if err != nil {
		return nil, err
	}
	if lb, ok := bucket.As[bucket.Made](b); ok {
		if ok, err := lb.Exists(); err != nil || !ok {
			b.Close()
			if err != nil {
				return nil, err
			}
			return nil, notFoundError{noBucket(url, lb.Root())}
		}
	}
	return b, nil
}

// noBucket says that the local bucket at url (directory root) does not
// exist: first how a bucket is chosen and where this one was looked for,
// so that a command run from the wrong directory, or without --bucket,
// shows it; then how to make one.
func noBucket(url, root string) string {
	env := "WORLDFS_BUCKET is not set"
	if v := os.Getenv("WORLDFS_BUCKET"); v != "" {
		env = "WORLDFS_BUCKET=" + v
	}
	return fmt.Sprintf("bucket %s does not exist: the bucket is --bucket, or $WORLDFS_BUCKET when --bucket is not given, else %s (%s); "+
		"no directory %s. 'worldfs init --bucket %s' makes it (the first write does too)", url, defaultBucket, env, root, url)
}

// requireWorld fails with a notFoundError unless world exists in b.
func requireWorld(ctx context.Context, b bucket.Bucket, world string) error {
	if err := index.ValidateWorldID(world); err != nil {
		return usagef("--world: %v", err)
	}
	if _, err := index.ReadMarker(ctx, b, world); err != nil {
		if errors.Is(err, bucket.ErrNotExist) {
			if err := bucketMissing(ctx, b, world); err != nil {
				return err
			}
			return notFoundError{fmt.Sprintf("world %s does not exist in bucket %s%s ('worldfs worlds' lists them)", world, b, didYouMean(world, worldNames(ctx, b)))}
		}
		return err
	}
	return nil
}

// worldNames lists the worlds of b from its directory's listing alone,
// for a suggestion (nil if it cannot).
func worldNames(ctx context.Context, b bucket.Bucket) []string {
	entries, err := index.ListWorldEntries(ctx, b)
	if err != nil {
		return nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.ID
	}
	return names
}

// bucketMissing tells a missing remote bucket from a missing world: a read
// of one object cannot (a remote store answers both with "not found"), a
// listing can. It is asked only once something was not found, so a command
// on a bucket that exists pays nothing for it.
func bucketMissing(ctx context.Context, b bucket.Bucket, world string) error {
	for _, err := range b.List(ctx, index.WorldPrefix(world), "") {
		if errors.Is(err, bucket.ErrNoBucket) {
			return notFoundError{fmt.Sprintf("bucket %s does not exist (%v)", b, err)}
		}
		break
	}
	return nil
}

// withBucket runs fn on the existing bucket at url, closing it after.
func withBucket(ctx context.Context, url string, fn func(bucket.Bucket) error) error {
	b, err := openExisting(ctx, url)
	if err != nil {
		return err
	}
	defer b.Close()
	return fn(b)
}

func main() {
	if err := failpoint.EnvError(); err != nil {
		fmt.Fprintln(os.Stderr, "worldfs:", err)
		os.Exit(exitUsage)
	}
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

// run executes one command line and returns its exit status: errors map
// to exit statuses only here (see the exit* constants).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	code := exitCode(ctx, err)
	report(stderr, err, code)
	return code
}

// report writes what a user sees of a command that failed with err and
// exits with code: the error, and for some what to do about it.
func report(stderr io.Writer, err error, code int) {
	var noReply *bucket.NotAnsweringError
	var usage usageError
	switch {
	case code == 0:
	case errors.As(err, &usage) && usage.usage != "":
		fmt.Fprintln(stderr, "worldfs:", err)
		fmt.Fprint(stderr, "\n", usage.usage)
	case errors.As(err, &usage):
		name := strings.TrimSpace("worldfs " + usage.cmd)
		fmt.Fprintf(stderr, "%s: %v (see '%s --help')\n", name, err, name)
	case code == exitInterrupted:
		fmt.Fprintln(stderr, "worldfs: interrupted")
	case errors.As(err, &noReply):
		fmt.Fprintln(stderr, "worldfs:", notAnsweringLine(err, noReply))
	case inDoubt(err):
		fmt.Fprintln(stderr, "worldfs:", err)
		fmt.Fprintln(stderr, "worldfs: a write of this command is in doubt: the bucket did not say whether it was committed. "+
			"Look before repeating it: 'worldfs log --world W' lists the world's newest catalog entries, 'worldfs check --world W' verifies it.")
	case bucket.IsCorruption(err):
		fmt.Fprintln(stderr, "worldfs:", err)
		fmt.Fprintln(stderr, "worldfs: the bucket holds damaged data (it differs from what the catalog records); 'worldfs check --world W --read-data' lists every damaged fragment and checks the catalog.")
	default:
		fmt.Fprintln(stderr, "worldfs:", err)
	}
}

// exitCode is the exit status of a command that returned err; ctx is the
// command's context, which a signal cancels.
func exitCode(ctx context.Context, err error) int {
	var (
		stale         *index.StaleWriterError
		conflict      *index.CatalogConflictError
		claimConflict *index.ClaimConflictError
	)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		return exitUsage
	case ctx.Err() != nil: // a signal stopped the command, whatever it failed with
		return exitInterrupted
	case errors.As(err, new(*bucket.NotAnsweringError)), inDoubt(err):
		return exitInDoubt
	case bucket.IsCorruption(err):
		return exitFailed
	case errors.As(err, new(notFoundError)), errors.Is(err, index.ErrNoWorld), errors.Is(err, wsql.ErrNotFound):
		return exitNotFound
	case errors.As(err, &stale), errors.As(err, &conflict), errors.As(err, &claimConflict),
		errors.Is(err, index.ErrWorldExists), errors.Is(err, bucket.ErrExist), errors.Is(err, errFactConflict),
		errors.As(err, new(*index.TagExistsError)):
		return exitConflict
	case errors.Is(err, index.ErrResync):
		return exitResync
	case errors.Is(err, bucket.ErrNotExist), errors.Is(err, bucket.ErrNoBucket):
		return exitNotFound
	}
	return exitFailed
}

// inDoubt reports whether err leaves a write of the command in doubt: a
// mutation the bucket did not confirm or refuse (bucket.ErrAmbiguous, as
// CreateOnce returns when it gives up), or a tick whose publish could not
// be reconciled (engine.ErrFrozen).
func inDoubt(err error) bool {
	return errors.Is(err, bucket.ErrAmbiguous) || errors.Is(err, engine.ErrFrozen)
}

// notAnsweringLine is the one line a user sees when the bucket stopped
// answering: which bucket, how long a call waited on what, and whether a
// write of this command is left in doubt (an unresolved create, or a tick
// whose publish could not be reconciled).
func notAnsweringLine(err error, noReply *bucket.NotAnsweringError) string {
	if inDoubt(err) {
		return noReply.Error() + "; whether this command's last write was committed is unknown until the bucket answers: look before repeating it"
	}
	return noReply.Error() + "; nothing was committed by the call that got no reply, and no write is in doubt"
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{msg: "no command given", usage: topUsage()}
	}
	if isHelp(args[0]) {
		_, err := io.WriteString(stdout, topUsage())
		return err
	}
	if args[0] == "--version" {
		args = []string{"version"}
	}
	// A command is either "name" (group "") or "group name".
	if cs, ok := commands[args[0]]; ok && args[0] != "" {
		if len(args) < 2 {
			return usageError{msg: args[0] + ": no subcommand given", usage: groupUsage(args[0], cs)}
		}
		if isHelp(args[1]) {
			_, err := io.WriteString(stdout, groupUsage(args[0], cs))
			return err
		}
		var names []string
		for _, c := range cs {
			if c.name == args[1] {
				return runCommand(ctx, args[0]+" "+c.name, c, args[2:], stdout, stderr)
			}
			names = append(names, c.name)
		}
		return usageError{msg: fmt.Sprintf("unknown subcommand %q%s", args[1], didYouMean(args[1], names)), cmd: args[0]}
	}
	var names []string
	for _, c := range commands[""] {
		if c.name == args[0] {
			return runCommand(ctx, c.name, c, args[1:], stdout, stderr)
		}
		names = append(names, c.name)
	}
	for g := range commands {
		if g != "" {
			names = append(names, g)
		}
	}
	slices.Sort(names)
	msg := fmt.Sprintf("unknown command %q", args[0])
	if groups := groupsOf(args[0]); len(groups) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", strings.Join(groups, " or "))
	} else {
		msg += didYouMean(args[0], names)
	}
	return usageError{msg: msg}
}

// groupsOf returns, sorted, "group name" for each group with a
// subcommand called name (worldfs fork → "world fork").
func groupsOf(name string) []string {
	var out []string
	for g, cs := range commands {
		for _, c := range cs {
			if g != "" && c.name == name {
				out = append(out, g+" "+name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

func runCommand(ctx context.Context, full string, c command, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(full, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // help and errors are printed by run, to stdout and stderr
	if c.flags != nil {
		c.flags(fs)
	}
	help := commandUsage(full, c, fs)
	bad := watchValues(fs)
	// Accept flags after positional arguments too ("ls PREFIX --bucket X");
	// everything after "--" is positional.
	var positional []string
	for {
		if err := checkFlags(fs, args); err != nil {
			return usageError{msg: err.Error(), cmd: full}
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				_, err := io.WriteString(stdout, help)
				if err != nil {
					return err
				}
				return flag.ErrHelp
			}
			if *bad != nil {
				err = *bad
			}
			return usageError{msg: err.Error(), cmd: full}
		}
		if fs.NArg() == 0 {
			break
		}
		if n := len(args) - fs.NArg(); n > 0 && args[n-1] == "--" {
			positional = append(positional, fs.Args()...)
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	err := c.run(context.WithValue(ctx, stderrKey{}, stderr), fs, positional, stdout)
	if u, ok := err.(usageError); ok && u.cmd == "" {
		u.cmd = full
		return u
	}
	return err
}

type stderrKey struct{}

// stderrOf is the standard error of the command ctx runs, for notes that
// are not its output.
func stderrOf(ctx context.Context) io.Writer {
	if w, ok := ctx.Value(stderrKey{}).(io.Writer); ok {
		return w
	}
	return os.Stderr
}

// commandUsage is a command's help: usage line, summary, flags spelled
// --name, example, and the bucket URLs if it takes a bucket.
func commandUsage(full string, c command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: worldfs %s [flags] %s\n\n%s\n\nFlags:\n", full, c.usage, c.summary)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		fmt.Fprintf(&b, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && !strings.Contains(usage, "default") {
			if g, ok := f.Value.(flag.Getter); ok && isString(g.Get()) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
		}
		b.WriteByte('\n')
	})
	fmt.Fprintf(&b, "\nExample:\n  %s\n", c.example)
	if strings.Contains(full, "bucket") || fs.Lookup("bucket") != nil {
		fmt.Fprintf(&b, "\n%s\n", bucketurl.Help)
	}
	return b.String()
}

func isString(v any) bool { _, ok := v.(string); return ok }

func topUsage() string {
	var b strings.Builder
	b.WriteString(`worldfs keeps simulation worlds as Parquet fragments in an object-store bucket.

Usage: worldfs COMMAND [flags]    (every command takes --help)

Exit status: 0 done, 1 failed, 2 bad command line, 3 the bucket did not
answer within --bucket-timeout, or a write is in doubt (the message says),
4 the bucket, world or object does not exist, 5 a stale writer or a conflict
(the name, tick or fact is taken), 6 watch's cursor is past the retention,
130 interrupted.

Commands:
`)
	groups := make([]string, 0, len(commands))
	for g := range commands {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if g == "" {
			cs := slices.Clone(commands[g])
			slices.SortFunc(cs, func(x, y command) int { return strings.Compare(x.name, y.name) })
			for _, c := range cs {
				fmt.Fprintf(&b, "  %-18s %s\n", c.name, c.summary)
			}
			continue
		}
		names := make([]string, 0, len(commands[g]))
		for _, c := range commands[g] {
			names = append(names, c.name)
		}
		fmt.Fprintf(&b, "  %-18s %s: %s\n", g+" SUBCOMMAND", groupSummaries[g], strings.Join(names, ", "))
	}
	return b.String()
}

func groupUsage(group string, cs []command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: worldfs %s SUBCOMMAND [flags]    (every subcommand takes --help)\n\n%s.\n\nSubcommands:\n", group, groupSummaries[group])
	for _, c := range cs {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	return b.String()
}
