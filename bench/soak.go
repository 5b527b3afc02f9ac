package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/engine/particles"
	"github.com/worldfs/worldfs/index"
	"github.com/worldfs/worldfs/maintenance"
)

// A soak (bench soak) runs what issue 37's lost data ran, on purpose
// harder: a writer of the reference simulation with background
// maintenance (compaction in small windows, collection at a tiny
// retention), and beside it, in other processes, worldfs optimize, worldfs
// gc --unsafe-retention, worldfs check --read-data, fresh worldfs sql
// processes and a mount that readers read. Everything read is compared
// with what the writer committed, which the soak records tick by tick.
// Invariant 16 (docs/ARCHITECTURE.md) says no commit ever names a missing
// object, whatever the retention and the timing: the soak fails on the
// first sign that one did.

// soakTables is the number of the reference simulation's tables.
const soakTables = 3

// readLag: the readers read ticks published at least this long ago (the
// mount follows new commits within a second: SEMANTICS.md).
const readLag = 3 * time.Second

// tickRecord is what the writer committed at one tick, per table (in
// soak.tables' order): the rows, the bytes and sha256 (its first 8 bytes)
// of the tick's fragment, the sum of its entity ids; and when it was
// published (ms after the start).
type tickRecord struct {
	rows   [soakTables]int32
	bytes  [soakTables]int32
	digest [soakTables]uint64
	ents   [soakTables]int64
	at     uint32
}

// soak is one run of bench soak.
type soak struct {
	o     soakOptions
	b     bucket.Bucket
	url   string // the bucket as the other processes open it
	world string
	work  string
	mnt   string
	start time.Time

	bucketDir, mountCache, sqlCache, checkCache, gcCache string

	tables  []string       // the writer's tables, by name, sorted
	tableOf map[string]int // table id → index in tables

	// live ends at the first failure (or when the caller's context
	// ends): every process and loop stops.
	live     context.Context
	stopLive context.CancelFunc

	rec struct {
		sync.RWMutex
		ticks []tickRecord
		facts []uint32 // when each fact was ingested, ms after the start
		// begun counts the facts whose ingest started: a fact is
		// visible before its Ingest returns.
		begun int
	}
	mu struct {
		sync.Mutex
		r          *SoakReport
		openIntent map[string]bool
	}
	// factsRead lets one reader at a time read the mount's facts file:
	// see readFacts.
	factsRead  sync.Mutex
	factsNext  time.Time // guarded by factsRead: the next read's earliest time
	mountPid   atomic.Int64
	staleSince atomic.Int64 // unix ns of the first of the sql runs in a row that met a collected snapshot (0: the last answered)
	feedSeq    atomic.Uint64
	reads      [4]atomic.Int64 // by readKinds
	read       atomic.Int64    // bytes
}

var readKinds = [4]string{"parquet", "csv", "manifest", "facts"}

// runSoak runs a soak with o and reports what it did and found; a
// failure found is in the report (soakVerdict fails the command), an
// error is a soak that could not run.
func runSoak(ctx context.Context, env Env, o soakOptions) (*SoakReport, error) {
	var err error
	if o.self, err = selfOr(o.self); err != nil {
		return nil, err
	}
	work, remove, err := benchDir(o.dir, "worldfs-bench-soak-")
	if err != nil {
		return nil, err
	}
	s := &soak{o: o, work: work, start: time.Now(), world: fmt.Sprintf("soak-%d", time.Now().UnixNano())}
	s.bucketDir, s.mnt, s.mountCache, s.sqlCache, s.checkCache, s.gcCache = soakDirs(work)
	s.url = o.url
	if s.url == "" {
		s.url = s.bucketDir
	}
	if !strings.Contains(s.url, "://") {
		if s.url, err = filepath.Abs(s.url); err != nil { // the other processes open the same directory
			return nil, err
		}
	}
	if s.b, err = env.OpenBucket(ctx, s.url); err != nil {
		return nil, err
	}
	defer s.b.Close()
	s.mu.r = &SoakReport{Bucket: s.url, World: s.world, Dir: work, Seed: o.seed, Windows: o.windows, Recent: o.recent,
		Compactions: map[string]int{}, DeletedByKind: map[string]int{}, Reads: map[string]int{}, Failures: []string{}}
	s.mu.openIntent = map[string]bool{}
	s.live, s.stopLive = context.WithCancel(ctx)
	defer s.stopLive()
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	r := s.report()
	if len(r.Failures) == 0 && o.dir == "" {
		remove()
	}
	return r, nil
}

// run runs the soak: the writer, then beside it the mount and its
// readers, the processes and the log's follower until the duration
// ends; then the final checks.
func (s *soak) run(ctx context.Context) error {
	o := s.o
	tables := particles.Tables()
	if len(tables) != soakTables {
		return fmt.Errorf("bench soak: the reference simulation has %d tables, the soak records %d", len(tables), soakTables)
	}
	w, err := engine.CreateWorld(ctx, s.b, s.world, tables, engine.Options{
		Compaction: maintenance.CompactOptions{Windows: o.windows, Recent: o.recent},
		// The writer collects after every 4th compaction run, at a
		// retention no user should take: invariant 16 must hold anyway.
		Collection: maintenance.CollectOptions{Retention: o.writerRetain, UnsafeRetention: true, Every: 4},
	})
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			w.Close()
		}
	}()
	s.tableOf = map[string]int{}
	for i, t := range w.Tables() {
		s.tables = append(s.tables, t.Name)
		s.tableOf[t.ID] = i
	}
	say("soak: world %s in %s, for %v; work directory %s", s.world, s.url, o.duration, s.work)
	mount, err := s.startMount()
	if err != nil {
		return err
	}
	defer mount.stop()

	run, stopRun := context.WithTimeout(s.live, o.duration)
	defer stopRun()
	feed, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	var feedDone sync.WaitGroup
	feedDone.Add(1)
	go func() { defer feedDone.Done(); s.follow(feed) }()

	var wg sync.WaitGroup
	loop := func(i uint64, f func(*rand.Rand)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(rand.New(rand.NewPCG(o.seed, i))) }()
	}
	loop(1, func(rng *rand.Rand) { s.every(run, o.optimizeEvery, rng, s.optimize) })
	loop(2, func(rng *rand.Rand) { s.every(run, o.gcEvery, rng, s.gc) })
	loop(3, func(rng *rand.Rand) { s.every(run, o.checkEvery, rng, func(*rand.Rand) { s.check(false) }) })
	loop(4, func(rng *rand.Rand) { s.every(run, o.sqlEvery, rng, func(rng *rand.Rand) { s.sql(rng, false) }) })
	loop(5, func(*rand.Rand) { s.sample(run, mount) })
	for i := range o.readers {
		loop(uint64(10+i), func(rng *rand.Rand) { s.reader(run, rng) })
	}
	werr := s.write(run, w)
	stopRun()
	wg.Wait()
	if werr != nil && s.live.Err() == nil {
		s.fail("the writer: %v", werr)
	}
	closed = true
	if err := w.Close(); err != nil && s.live.Err() == nil {
		s.fail("closing the writer: %v", err)
	}
	res, err := w.Maintenance()
	if err != nil && s.live.Err() == nil {
		s.fail("the writer's background maintenance: %v", err)
	}
	s.mu.Lock()
	s.mu.r.WriterDeleted = w.Collected()
	s.mu.r.Refused += res.Refused
	s.mu.Unlock()
	s.sampleNow(ctx, mount)
	mount.stop()

	if s.live.Err() == nil {
		// Nothing runs any more: the catalog must name only present
		// objects, a check must be clean and a fresh sql must see every
		// tick as the writer committed it.
		say("soak: final checks")
		if gone, err := s.absentNamed(ctx); err != nil {
			s.fail("reading the catalog's tip: %v", err)
		} else if len(gone) > 0 {
			s.fail("the catalog names %d absent objects: %s", len(gone), strings.Join(gone, ", "))
		}
		s.check(true)
		s.sql(nil, true)
	}
	if s.live.Err() != nil && ctx.Err() == nil {
		// A failure: say whether the catalog names what is gone.
		if gone, err := s.absentNamed(ctx); err == nil && len(gone) > 0 {
			s.fail("the catalog's tip names %d absent objects: %s", len(gone), strings.Join(gone, ", "))
		}
	}
	// The log's follower counts every entry up to the tip.
	if st, _, err := index.Load(ctx, s.b, s.world); err == nil {
		deadline := time.Now().Add(30 * time.Second)
		for s.feedSeq.Load() < st.Seq && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	stopFeed()
	feedDone.Wait()
	return ctx.Err()
}

// report is the run's report, its totals filled in.
func (s *soak) report() *SoakReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.RLock()
	defer s.rec.RUnlock()
	r := s.mu.r
	r.Seconds = time.Since(s.start).Seconds()
	r.Ticks, r.Facts = int64(len(s.rec.ticks)), int64(len(s.rec.facts))
	if n := len(s.rec.ticks); n > 0 {
		r.TicksPerSec = float64(n) / (float64(s.rec.ticks[n-1].at) / 1000)
	}
	for i, k := range readKinds {
		r.Reads[k] = int(s.reads[i].Load())
	}
	r.ReadBytes = s.read.Load()
	return r
}

// fail records a failure and stops the soak.
func (s *soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	if len(s.mu.r.Failures) < 20 {
		s.mu.r.Failures = append(s.mu.r.Failures, msg)
	}
	s.mu.Unlock()
	say("soak: FAIL at %.1f s: %s", time.Since(s.start).Seconds(), msg)
	s.stopLive()
}

// every calls do about every mean (each wait drawn from half to one and a
// half times it) until ctx ends.
func (s *soak) every(ctx context.Context, mean time.Duration, rng *rand.Rand, do func(*rand.Rand)) {
	for {
		if bucket.Sleep(ctx, mean/2+time.Duration(rng.Int64N(int64(mean)))) != nil {
			return
		}
		do(rng)
	}
}

// write runs the writer until ctx ends: a tick every o.tickEvery, a fact
// every o.factsEvery ticks, each tick's receipt recorded.
func (s *soak) write(ctx context.Context, w *engine.World) error {
	if err := particles.Install(w); err != nil {
		return err
	}
	if err := particles.Setup(w, s.o.emitters); err != nil {
		return err
	}
	// The last processor sees each tick's frames as they are appended.
	type counts struct {
		rows [soakTables]int32
		ents [soakTables]int64
	}
	computed := map[int64]counts{}
	err := w.AddProcessor(func(tc *engine.TickContext) error {
		var c counts
		for i, name := range s.tables {
			f := tc.Frame(name)
			c.rows[i] = int32(f.Len())
			for _, e := range f.Entities {
				c.ents[i] += e
			}
		}
		computed[tc.Tick] = c
		return nil
	})
	if err != nil {
		return err
	}
	reading, err := engine.NewComponent("reading", engine.Field{Name: "seq", Type: engine.Int64})
	if err != nil {
		return err
	}
	facts, err := engine.NewFactTable("reading", reading)
	if err != nil {
		return err
	}
	receive := func(rs []engine.CommittedTickReceipt) error {
		for _, r := range rs {
			c, ok := computed[r.Tick]
			delete(computed, r.Tick)
			rec := tickRecord{rows: c.rows, ents: c.ents, at: uint32(time.Since(s.start).Milliseconds())}
			if !ok || len(r.Appends) != soakTables {
				return fmt.Errorf("tick %d: a receipt of %d appends for a tick computed %v", r.Tick, len(r.Appends), ok)
			}
			for _, a := range r.Appends {
				i := s.tableOf[a.Table]
				hex, _ := strings.CutPrefix(a.Digest, "sha256:")
				d, err := strconv.ParseUint(hex[:min(16, len(hex))], 16, 64)
				if err != nil || a.Rows != int64(rec.rows[i]) {
					return fmt.Errorf("tick %d table %s: receipt of %d rows, digest %q; %d rows computed", r.Tick, s.tables[i], a.Rows, a.Digest, rec.rows[i])
				}
				rec.bytes[i], rec.digest[i] = int32(a.Bytes), d
			}
			s.rec.Lock()
			if int64(len(s.rec.ticks)) != r.Tick {
				s.rec.Unlock()
				return fmt.Errorf("tick %d published after %d ticks", r.Tick, len(s.rec.ticks))
			}
			s.rec.ticks = append(s.rec.ticks, rec)
			s.rec.Unlock()
		}
		return nil
	}
	var pace <-chan time.Time
	if s.o.tickEvery > 0 {
		tk := time.NewTicker(s.o.tickEvery)
		defer tk.Stop()
		pace = tk.C
	}
	for ctx.Err() == nil {
		if pace != nil {
			select {
			case <-ctx.Done():
				continue
			case <-pace:
			}
		}
		if err := particles.Schedule(w); err != nil {
			return err
		}
		rs, err := w.Submit(s.live)
		if err := receive(rs); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		if _, err := w.Maintenance(); err != nil {
			return fmt.Errorf("background maintenance: %w", err)
		}
		if s.o.factsEvery > 0 && w.Tick()%int64(s.o.factsEvery) == 0 {
			s.rec.Lock()
			s.rec.begun++
			n := s.rec.begun
			s.rec.Unlock()
			_, err := w.Ingest(s.live, engine.Fact{Producer: "soak", ExternalID: strconv.Itoa(n), Table: facts,
				Values: engine.Values{"reading_seq": int64(n)}})
			if err != nil {
				return fmt.Errorf("ingesting fact %d: %w", n, err)
			}
			s.rec.Lock()
			s.rec.facts = append(s.rec.facts, uint32(time.Since(s.start).Milliseconds()))
			s.rec.Unlock()
		}
	}
	rs, err := w.Flush(s.live)
	if rerr := receive(rs); rerr != nil {
		return rerr
	}
	return err
}

// follow counts the log's entries from the first on (compactions by
// window, intents) until ctx ends.
func (s *soak) follow(ctx context.Context) {
	for c, err := range index.Changes(ctx, s.b, s.world, 1, 200*time.Millisecond) {
		if err != nil {
			if ctx.Err() == nil && s.live.Err() == nil {
				s.fail("following the log: %v", err)
			}
			return
		}
		e := c.Entry
		s.mu.Lock()
		switch {
		case e.Rewrite != nil && e.Rewrite.Facts:
			s.mu.r.Compactions["facts"]++
		case e.Rewrite != nil && e.Rewrite.Span != nil:
			s.mu.r.Compactions[strconv.FormatInt(e.Rewrite.Span.To-e.Rewrite.Span.From+1, 10)]++
		case e.Rewrite != nil:
			s.mu.r.Compactions["other"]++
		case e.Kind == index.KindIntentOpen && !s.mu.openIntent[e.Intent.ID]: // a renewal opens it again
			s.mu.openIntent[e.Intent.ID] = true
			s.mu.r.IntentsOpened++
		case e.Kind == index.KindIntentClose && s.mu.openIntent[e.Intent.ID]:
			delete(s.mu.openIntent, e.Intent.ID)
			s.mu.r.IntentsClosed++
		}
		s.mu.Unlock()
		s.feedSeq.Store(c.Seq)
	}
}

// absentNamed returns the objects the catalog's tip names that the
// bucket lacks, each still named by a second load after it was found
// absent (an object named, found absent, then named again was deleted
// while named: names are never reused).
func (s *soak) absentNamed(ctx context.Context) ([]string, error) {
	named, err := s.tipNames(ctx)
	if err != nil {
		return nil, err
	}
	var absent []string
	for name := range named {
		if _, err := s.b.Stat(ctx, name); errors.Is(err, bucket.ErrNotExist) {
			absent = append(absent, name)
		} else if err != nil {
			return nil, err
		}
	}
	if len(absent) == 0 {
		return nil, nil
	}
	return s.stillNamed(ctx, absent)
}

// stillNamed returns those of names the catalog's tip names now.
func (s *soak) stillNamed(ctx context.Context, names []string) ([]string, error) {
	named, err := s.tipNames(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if named[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// tipNames loads the catalog's tip and returns every object it names.
func (s *soak) tipNames(ctx context.Context) (map[string]bool, error) {
	st, _, err := index.Load(ctx, s.b, s.world)
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	err = st.Fragments("", func(r index.FragmentRef) bool {
		named[r.Path] = true
		return true
	})
	return named, err
}

// proc runs worldfs with args in a fresh process (ended with the soak's
// live context) and returns what it printed.
func (s *soak) proc(args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(s.live, s.o.self, args...)
	cmd.SysProcAttr = childAttrs()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// lastLines is the end of a process's stderr, for a failure's message.
func lastLines(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	return strings.Join(lines, " | ")
}

// sample records what the soak holds every so often until ctx ends.
func (s *soak) sample(ctx context.Context, m *soakMount) {
	every := min(max(s.o.duration/20, 5*time.Second), time.Minute)
	for bucket.Sleep(ctx, every) == nil {
		s.sampleNow(ctx, m)
	}
}

func (s *soak) sampleNow(ctx context.Context, m *soakMount) {
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sm := SoakSample{Seconds: time.Since(s.start).Seconds(), RSSMiB: mib(vmRSS(os.Getpid())), HeapMiB: mib(int64(ms.HeapInuse))}
	if pid := int(s.mountPid.Load()); pid > 0 {
		sm.MountRSSMiB = mib(vmRSS(pid))
	}
	s.rec.RLock()
	sm.Tick = int64(len(s.rec.ticks)) - 1
	s.rec.RUnlock()
	var data, log, cps, state, all int64
	for _, prefix := range []string{index.DataPrefix(s.world), index.WorldPrefix(s.world)} {
		for a, err := range s.b.List(ctx, prefix, "") {
			if err != nil {
				return
			}
			sm.Objects++
			all += a.Size
			switch {
			case strings.HasPrefix(a.Name, index.DataPrefix(s.world)):
				data += a.Size
				sm.DataObjects++
			case strings.HasPrefix(a.Name, index.LogPrefix(s.world)):
				log += a.Size
				sm.LogObjects++
			case strings.HasPrefix(a.Name, index.CheckpointPrefix(s.world)):
				cps += a.Size
				sm.CheckpointCount++
			case strings.HasPrefix(a.Name, index.ShardPrefix(s.world)):
				state += a.Size
				sm.StateObjects++
			}
		}
	}
	sm.BucketMiB, sm.DataMiB, sm.LogMiB, sm.CheckpointsMiB, sm.StateMiB = mib(all), mib(data), mib(log), mib(cps), mib(state)
	sm.CachesMiB = mib(dirBytes(s.mountCache) + dirBytes(s.sqlCache) + dirBytes(s.checkCache) + dirBytes(s.gcCache))
	say("soak: %.0f s, tick %d, rss %.0f MiB (mount %.0f MiB), bucket %d objects %.1f MiB", sm.Seconds, sm.Tick, sm.RSSMiB, sm.MountRSSMiB, sm.Objects, sm.BucketMiB)
	s.mu.Lock()
	s.mu.r.Samples = append(s.mu.r.Samples, sm)
	s.mu.Unlock()
}

// soakMount is the worldfs mount process the readers read.
type soakMount struct {
	cmd     *exec.Cmd
	self    string // the worldfs binary
	mnt     string
	exited  chan struct{}
	once    sync.Once
	stopped atomic.Bool // stop was called: the exit is no failure
}

// startMount runs worldfs mount on the bucket in a process of its own and
// waits until it has mounted.
func (s *soak) startMount() (*soakMount, error) {
	if err := os.MkdirAll(s.mnt, 0o755); err != nil {
		return nil, err
	}
	// A small cache: each set of visible facts is a version of the facts
	// file derived into it, so it fills and evicts within minutes.
	cmd := exec.Command(s.o.self, "mount", "--bucket", s.url, "--cache-dir", s.mountCache, "--cache-size", "256MiB", s.mnt)
	cmd.SysProcAttr = childAttrs()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// What the mount logs (each errno it answers with its cause) goes to
	// mount.log in the work directory, kept after a failure.
	log, err := os.Create(filepath.Join(s.work, "mount.log"))
	if err != nil {
		return nil, err
	}
	var errb lockedTail
	cmd.Stderr = io.MultiWriter(&errb, log)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("worldfs mount: %w", err)
	}
	m := &soakMount{cmd: cmd, self: s.o.self, mnt: s.mnt, exited: make(chan struct{})}
	s.mountPid.Store(int64(cmd.Process.Pid))
	mounted := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first {
				mounted <- true
				first = false
			}
		}
		if first {
			mounted <- false
		}
	}()
	go func() {
		err := cmd.Wait()
		log.Close()
		s.mountPid.Store(0)
		close(m.exited)
		if !m.stopped.Load() && s.live.Err() == nil {
			s.fail("the mount process exited: %v: %s", err, lastLines(errb.String()))
		}
	}()
	select {
	case ok := <-mounted:
		if ok {
			return m, nil
		}
	case <-time.After(time.Minute):
	}
	m.stop()
	return nil, fmt.Errorf("worldfs mount %s did not mount: %s", s.mnt, lastLines(errb.String()))
}

// stop unmounts with worldfs umount, as a user does; if the mount has not
// exited 30 s later, an interrupt (Ctrl-C), then a lazy unmount and a
// kill. A mountpoint its process left mounted is detached.
func (m *soakMount) stop() {
	m.once.Do(func() {
		m.stopped.Store(true)
		umount := exec.Command(m.self, "umount", m.mnt)
		umount.SysProcAttr = childAttrs()
		umount.Run()
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			m.cmd.Process.Signal(os.Interrupt)
			select {
			case <-m.exited:
			case <-time.After(10 * time.Second):
				m.cmd.Process.Kill()
				<-m.exited
			}
		}
		syscall.Unmount(m.mnt, syscall.MNT_DETACH) // EINVAL when nothing is mounted there
	})
}

// lockedTail keeps the last 64 KiB written to it.
type lockedTail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *lockedTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = t.buf[len(t.buf)-64<<10:]
	}
	return len(p), nil
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
