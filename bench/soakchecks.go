package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/worldfs/worldfs/index"
)

// optimize runs worldfs optimize with the writer's windows.
func (s *soak) optimize(*rand.Rand) {
	var ws []string
	for _, w := range s.o.windows {
		ws = append(ws, strconv.FormatInt(w, 10))
	}
	out, errOut, err := s.proc("optimize", "--bucket", s.url, "--world", s.world, "--recent", strconv.FormatInt(s.o.recent, 10),
		"--windows", strings.Join(ws, ","), "--json")
	if s.live.Err() != nil {
		return
	}
	if err != nil {
		s.fail("worldfs optimize: %v: %s", err, lastLines(errOut))
		return
	}
	var res struct{ Refused int }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		s.fail("worldfs optimize printed %.300q: %v", out, err)
		return
	}
	s.mu.Lock()
	s.mu.r.Optimizes++
	s.mu.r.Refused += res.Refused
	s.mu.Unlock()
}

// gc runs worldfs gc at a retention drawn from the soak's.
func (s *soak) gc(rng *rand.Rand) {
	retention := s.o.retentions[rng.IntN(len(s.o.retentions))]
	out, errOut, err := s.proc("gc", "--bucket", s.url, "--world", s.world, "--retention", retention.String(), "--unsafe-retention",
		"--cache-dir", s.gcCache, "--json")
	if s.live.Err() != nil {
		return
	}
	if err != nil {
		s.fail("worldfs gc --retention %v: %v: %s", retention, err, lastLines(errOut))
		return
	}
	// One JSON line per object (deleted, kept or, for an intent, closed),
	// then the summary.
	var deleted, expired int
	byKind := map[string]int{}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var line struct {
			Object  string
			Closed  bool
			Deleted json.RawMessage
			ByKind  map[string]int `json:"by_kind"`
		}
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			s.fail("worldfs gc printed %.300q: %v", out, err)
			return
		}
		switch {
		case line.Object != "" && line.Closed:
			expired++
		case line.Object == "":
			if err := json.Unmarshal(line.Deleted, &deleted); err != nil {
				s.fail("worldfs gc printed a summary %.300q: %v", out, err)
				return
			}
			byKind = line.ByKind
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.r.GCs++
	s.mu.r.Deleted += deleted
	s.mu.r.IntentsExpired += expired
	for k, n := range byKind {
		s.mu.r.DeletedByKind[k] += n
	}
}

// check runs worldfs check --read-data. While the soak runs, other
// processes collect at a tiny retention, so a check may meet what it
// listed collected before it read it (a reader of an older snapshot,
// which a retention over maintenance.MinRetention protects): the tip
// decides. An error about a file the catalog's tip no longer names is
// such a stale read; one about a file it still names is damage. An error
// about the catalog itself (a checkpoint it listed, collected since: the
// longer the history, the longer a check compares checkpoints with the
// log) is stale if the catalog loads at its tip; the final check, with
// nothing else running, compares every checkpoint kept. The final check
// must be clean.
func (s *soak) check(final bool) {
	what := "worldfs check --read-data"
	if final {
		what = "the final worldfs check --read-data"
	}
	out, errOut, err := s.proc("check", "--bucket", s.url, "--world", s.world, "--read-data", "--json", "--cache-dir", s.checkCache)
	if s.live.Err() != nil {
		return
	}
	s.mu.Lock()
	s.mu.r.Checks++
	s.mu.Unlock()
	if err == nil {
		return
	}
	var res struct {
		Errors []struct{ Fragment, What, Message string }
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || len(res.Errors) == 0 {
		s.fail("%s: %v: %s", what, err, lastLines(errOut))
		return
	}
	var msgs, files []string
	catalog := false
	for _, e := range res.Errors {
		msgs = append(msgs, e.Message)
		if e.Fragment == "" {
			catalog = true
		} else {
			files = append(files, e.Fragment)
		}
	}
	msg := strings.Join(msgs, "; ")
	if final {
		s.fail("%s: %d errors: %s", what, len(res.Errors), msg)
		return
	}
	named, terr := s.stillNamed(s.live, files)
	switch {
	case terr != nil:
		s.fail("%s: %s; and reading the catalog's tip: %v", what, msg, terr)
	case len(named) > 0:
		s.fail("%s: %s (the catalog's tip still names %s)", what, msg, strings.Join(named, ", "))
	case catalog:
		if _, _, lerr := index.Load(s.live, s.b, s.world); lerr != nil {
			s.fail("%s: %s; and the catalog does not load at its tip: %v", what, msg, lerr)
			return
		}
		s.stale(what, msg)
	default:
		s.stale(what, msg)
	}
}

// staleFor is how long sql runs may go on failing on a snapshot collected
// under them, none answering, before the soak fails: at the tiny
// retentions a run that takes a second loses that race often (13 of 27
// runs of a quiet five-minute soak, three in a row within a 15 s one on
// a busy machine), while a reader that never reads the catalog's tip
// fails the final run, made after everything else stopped, whatever this
// says. Damage is the tip naming an absent object, checked first.
const staleFor = 2 * time.Minute

// staleStreak notes an sql run that met a snapshot collected since and
// returns how long sql runs have met one, none answering.
func (s *soak) staleStreak() time.Duration {
	now := time.Now().UnixNano()
	s.staleSince.CompareAndSwap(0, now)
	return time.Duration(now - s.staleSince.Load())
}

// stale counts a reader of an older snapshot that met a file collected
// since, which the tip proved no longer named.
func (s *soak) stale(what, msg string) {
	say("soak: %s read a snapshot collected since (the tip names none of its files): %s", what, msg)
	s.mu.Lock()
	s.mu.r.Stale++
	s.mu.Unlock()
}

// sql runs a fresh worldfs sql that sums, per table, the visible rows of
// the ticks up to the newest the writer published (count, sum of entity
// ids, ticks with rows) and each tick's in a window of them, and the
// visible facts, and compares the answer with what the writer committed.
// The final one compares every tick.
func (s *soak) sql(rng *rand.Rand, final bool) {
	s.rec.RLock()
	head, facts0 := int64(len(s.rec.ticks))-1, len(s.rec.facts)
	s.rec.RUnlock()
	if head < 0 {
		return
	}
	from, to := int64(0), head
	if !final {
		width := min(head+1, s.o.windows[len(s.o.windows)-1]*64)
		from = head - width + 1 // the newest ticks, where compaction works
		if rng.IntN(2) == 0 {
			from = rng.Int64N(head - width + 2)
		}
		to = from + width - 1
	}
	var q strings.Builder
	for i, t := range s.tables {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&q, "SELECT '%s' AS t, -1 AS tick, count(*) AS n, coalesce(sum(entity_id), 0) AS s, count(DISTINCT tick) AS k FROM %s WHERE tick <= %d"+
			" UNION ALL SELECT '%s', tick, count(*), sum(entity_id), 1 FROM %s WHERE tick BETWEEN %d AND %d GROUP BY tick",
			t, t, head, t, t, from, to)
	}
	if s.o.factsEvery > 0 && facts0 > 0 {
		q.WriteString(" UNION ALL SELECT 'reading', -1, count(*), coalesce(sum(reading_seq), 0), 0 FROM reading")
	}
	out, errOut, err := s.proc("sql", "--bucket", s.url, "--world", s.world, "--cache-dir", s.sqlCache, "--format", "csv", q.String())
	if s.live.Err() != nil {
		return
	}
	s.mu.Lock()
	s.mu.r.SQLs++
	s.mu.Unlock()
	what := fmt.Sprintf("worldfs sql of ticks 0..%d", head)
	if final {
		what = "the final " + what
	}
	if err != nil {
		// A query reads the files of the catalog it loaded: the tip
		// decides whether it met damage or a snapshot collected since.
		gone, terr := s.absentNamed(s.live)
		switch {
		case terr != nil:
			s.fail("%s: %v: %s; and reading the catalog's tip: %v", what, err, lastLines(errOut), terr)
		case len(gone) > 0:
			s.fail("%s: %v: %s (the catalog's tip names %d absent objects: %s)", what, err, lastLines(errOut), len(gone), strings.Join(gone, ", "))
		case final:
			s.fail("%s: %v: %s", what, err, lastLines(errOut))
		case s.staleStreak() >= staleFor:
			s.fail("%s: %v: %s; sql runs failed for %v, none answering, while the catalog names no absent object", what, err, lastLines(errOut), staleFor)
		default:
			s.stale(what, lastLines(errOut))
		}
		return
	}
	s.staleSince.Store(0)
	s.rec.RLock()
	facts1 := s.rec.begun
	s.rec.RUnlock()
	if msg := s.compareSQL(out, head, from, to, facts0, facts1); msg != "" {
		s.fail("%s (ticks %d..%d each): %s", what, from, to, msg)
	}
}

// compareSQL compares sql's answer (CSV: t, tick, n, s, k) with the
// writer's record; "" when they agree.
func (s *soak) compareSQL(out string, head, from, to int64, facts0, facts1 int) string {
	type key struct {
		t    string
		tick int64
	}
	type sums struct{ n, s, k int64 }
	want := map[key]sums{}
	s.rec.RLock()
	for tick := int64(0); tick <= head; tick++ {
		r := s.rec.ticks[tick]
		for i, t := range s.tables {
			all := want[key{t, -1}]
			all.n += int64(r.rows[i])
			all.s += r.ents[i]
			if r.rows[i] > 0 {
				all.k++
				if tick >= from && tick <= to {
					want[key{t, tick}] = sums{int64(r.rows[i]), r.ents[i], 1}
				}
			}
			want[key{t, -1}] = all
		}
	}
	s.rec.RUnlock()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) == 0 {
		return fmt.Sprintf("an answer that is not CSV (%v): %.200q", err, out)
	}
	got := map[key]sums{}
	var facts *sums
	for _, row := range rows[1:] {
		if len(row) != 5 {
			return fmt.Sprintf("a row of %d columns: %q", len(row), row)
		}
		var v [4]int64
		for i, f := range row[1:] {
			if v[i], err = strconv.ParseInt(f, 10, 64); err != nil {
				return fmt.Sprintf("row %q: %v", row, err)
			}
		}
		if row[0] == "reading" {
			facts = &sums{v[1], v[2], 0}
			continue
		}
		got[key{row[0], v[0]}] = sums{v[1], v[2], v[3]}
	}
	var diffs []string
	for k, w := range want {
		if g := got[k]; g != w {
			diffs = append(diffs, fmt.Sprintf("%s tick %d: %d rows (entity ids summing to %d, %d ticks), committed %d (%d, %d)", k.t, k.tick, g.n, g.s, g.k, w.n, w.s, w.k))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s tick %d: %d rows where none was committed", k.t, k.tick, g.n))
		}
	}
	if s.o.factsEvery > 0 && facts0 > 0 {
		switch {
		case facts == nil:
			diffs = append(diffs, "no count of the facts")
		case facts.n < int64(facts0) || facts.n > int64(facts1) || facts.s != facts.n*(facts.n+1)/2:
			diffs = append(diffs, fmt.Sprintf("%d facts visible (their seq summing to %d), %d to %d ingested", facts.n, facts.s, facts0, facts1))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}

// reader reads random visible ticks' files through the mount until ctx
// ends, comparing each with what the writer committed: a .parquet is the
// fragment the writer wrote, byte for byte; a .csv has its rows; a
// manifest.json describes each table's rows and file; the facts/ file
// holds the facts ingested; and every file's stat size is the bytes read.
func (s *soak) reader(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
		kind := rng.IntN(10) / 3 // parquet, csv, manifest; 9: facts
		if kind == 3 && s.o.factsEvery > 0 {
			s.readFacts()
			continue
		}
		kind %= 3
		tick, rec, ok := s.pickTick(rng)
		if !ok {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		i := rng.IntN(soakTables)
		name := s.tables[i] + "." + readKinds[kind]
		if kind == 2 {
			name = "manifest.json"
		}
		path := filepath.Join(s.mnt, s.world, "runs", index.DefaultRun, "ticks", fmt.Sprintf("%012d", tick), name)
		data, err := readWhole(path)
		if s.live.Err() != nil {
			return
		}
		age := time.Since(s.start).Seconds() - float64(rec.at)/1000
		if err != nil {
			s.fail("mount: tick %d (published %.1f s ago): %v (the mount's log: %s)", tick, age, err, filepath.Join(s.work, "mount.log"))
			return
		}
		s.reads[kind].Add(1)
		s.read.Add(int64(len(data)))
		if msg := s.compareFile(kind, i, tick, rec, data); msg != "" {
			s.fail("mount: tick %d (published %.1f s ago): %s: %s", tick, age, name, msg)
			return
		}
	}
}

// pickTick draws a tick published at least readLag ago: half of the time
// from all of them, half from the newest few largest windows (where
// compaction works).
func (s *soak) pickTick(rng *rand.Rand) (int64, tickRecord, bool) {
	s.rec.RLock()
	defer s.rec.RUnlock()
	before := uint32(max(0, (time.Since(s.start) - readLag).Milliseconds()))
	n := sort.Search(len(s.rec.ticks), func(i int) bool { return s.rec.ticks[i].at > before })
	if n == 0 {
		return 0, tickRecord{}, false
	}
	lo := 0
	if rng.IntN(2) == 0 {
		lo = max(0, n-int(2*s.o.windows[0]))
	}
	t := lo + rng.IntN(n-lo)
	return int64(t), s.rec.ticks[t], true
}

// compareFile compares a mount file of tick with the writer's record;
// "" when they agree.
func (s *soak) compareFile(kind, table int, tick int64, rec tickRecord, data []byte) string {
	switch kind {
	case 0:
		sum := sha256.Sum256(data)
		if len(data) != int(rec.bytes[table]) || binary.BigEndian.Uint64(sum[:8]) != rec.digest[table] {
			return fmt.Sprintf("%d bytes, sha256 %x…; the writer's fragment has %d bytes, sha256 %016x…", len(data), sum[:8], rec.bytes[table], rec.digest[table])
		}
	case 1:
		if lines := bytes.Count(data, []byte("\n")) - 1; lines != int(rec.rows[table]) {
			return fmt.Sprintf("%d rows; the writer committed %d", lines, rec.rows[table])
		}
	case 2:
		var m struct {
			Tick   int64
			Tables []struct {
				Name    string
				Rows    *int64
				Parquet *struct {
					Bytes  int64
					Digest string
				}
			}
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return err.Error()
		}
		if m.Tick != tick || len(m.Tables) != soakTables {
			return fmt.Sprintf("describes tick %d with %d tables", m.Tick, len(m.Tables))
		}
		for _, t := range m.Tables {
			i := -1
			for j, name := range s.tables {
				if name == t.Name {
					i = j
				}
			}
			if i < 0 || t.Rows == nil || t.Parquet == nil {
				return fmt.Sprintf("table %q: rows %v, file %v", t.Name, t.Rows, t.Parquet)
			}
			want := fmt.Sprintf("sha256:%016x", rec.digest[i])
			if *t.Rows != int64(rec.rows[i]) || t.Parquet.Bytes != int64(rec.bytes[i]) || !strings.HasPrefix(t.Parquet.Digest, want) {
				return fmt.Sprintf("table %s: %d rows, a file of %d bytes, %.23s…; the writer committed %d rows, %d bytes, %s…",
					t.Name, *t.Rows, t.Parquet.Bytes, t.Parquet.Digest, rec.rows[i], rec.bytes[i], want)
			}
		}
	}
	return ""
}

// factsReadEvery: the facts file is read at most this often. Each read
// of a new set of visible facts derives the whole file into the mount's
// cache, where it stays for the cache's grace (10 minutes) whatever
// --cache-size says.
const factsReadEvery = 10 * time.Second

// readFacts reads the mount's file of visible facts: it holds at least
// the facts ingested readLag before and at most those whose ingest began
// by the end of the read. One reader at a time reads it, at most every
// factsReadEvery: opens of two versions of a facts file at once share
// the inode's size in the kernel, and a read of one is cut at the other's
// size (a mount bug of its own, outside what this soak is for).
func (s *soak) readFacts() {
	if !s.factsRead.TryLock() {
		return
	}
	defer s.factsRead.Unlock()
	if time.Now().Before(s.factsNext) {
		return
	}
	s.factsNext = time.Now().Add(factsReadEvery)
	s.rec.RLock()
	before := uint32(max(0, (time.Since(s.start) - readLag).Milliseconds()))
	least := sort.Search(len(s.rec.facts), func(i int) bool { return s.rec.facts[i] > before })
	s.rec.RUnlock()
	if least == 0 {
		return
	}
	// The file changes as facts are ingested: its size at a stat is that
	// of the facts visible then, not necessarily at the open after.
	path := filepath.Join(s.mnt, s.world, "facts", index.DefaultRun, "reading.csv")
	data, err := os.ReadFile(path)
	if s.live.Err() != nil {
		return
	}
	if err != nil {
		s.fail("mount: the facts (%d ingested %v before): %v", least, readLag, err)
		return
	}
	s.rec.RLock()
	most := s.rec.begun
	s.rec.RUnlock()
	s.reads[3].Add(1)
	s.read.Add(int64(len(data)))
	switch n := bytes.Count(data, []byte("\n")) - 1; {
	case !bytes.HasSuffix(data, []byte("\n")):
		s.fail("mount: %s: %d bytes read, ending in the middle of a line: %q", path, len(data), data[max(0, len(data)-40):])
	case n < least || n > most:
		s.fail("mount: %s holds %d facts; %d were ingested %v before the read, %d begun by its end", path, n, least, readLag, most)
	}
}

// readWhole reads a tick's file through the mount: its stat size (at
// lookup, before the open) must be the bytes a read returns (invariant
// 14: a tick's files never change).
func readWhole(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(bufio.NewReader(f))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != fi.Size() {
		return nil, fmt.Errorf("%s: stat size %d, read %d bytes", path, fi.Size(), len(data))
	}
	return data, nil
}
