package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/engine"
	"github.com/worldfs/worldfs/index"
)

// A ctl command is one JSON object on one line: {"op": NAME, ...}. Each
// op decodes its own arguments strictly (an unknown field is EINVAL) and
// checks them before anything is written, so a malformed command commits
// nothing. Adding a command is one entry in one of these tables.
type ctlOp func(ctx context.Context, m *Mount, world string, cmd []byte) (any, error)

// rootOps are the commands of <mount>/ctl.
var rootOps = map[string]ctlOp{
	"create": opCreate, // {"op":"create","world":W,"tables":[{"name":A,"components":[{"name":C,"fields":[{"name":F,"type":T}]}]}]}
	"fork":   opFork,   // {"op":"fork","world":CHILD,"parent":P,"run":"main","tick":N}
	"resume": opResume, // {"op":"resume","world":W}
	"status": opStatus, // {"op":"status","world":W,"status":"active"|"archived"?,"writer_mode":"cleanup_only"?}
}

// worldOps are the commands of <mount>/<world>/ctl.
var worldOps = map[string]ctlOp{
	"commit_tick": opCommitTick, // {"op":"commit_tick","tick":N?,"frames":{A:[{"entity_id":E,COL:V…}…] or A:"/path.parquet|.jsonl"}}
	"ingest":      opIngest,     // {"op":"ingest","producer":P,"external_id":X,"table":T,"components":{C:{F:V…}}} (engine.FactDocument)
	"evaluate":    opEvaluate,   // {"op":"evaluate","id":E,"at":N?,"selector":{…},"contract":{…},"outcomes":[…]} (engine.EvaluationDocument)
}

// opIngest ingests one fact exactly once; the answer is its receipt.
func opIngest(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	var c struct {
		Op string `json:"op"`
		engine.FactDocument
	}
	if err := engine.DecodeStrict(cmd, &c); err != nil {
		return nil, badf("ingest: %v", err)
	}
	svc, err := m.ingestion(ctx, world)
	if err != nil {
		return nil, err
	}
	f, err := c.Fact(ctx, m.b, world)
	if err != nil {
		return nil, err // engine.ErrInvalid for a bad document (EINVAL); storage errors stay EIO
	}
	return m.gate(svc).IngestFact(ctx, m.principal(), f)
}

// opEvaluate records an evaluation receipt whose outcomes the command
// carries (the grader ran outside worldfs); the answer is the receipt.
func opEvaluate(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	var c struct {
		Op string `json:"op"`
		engine.EvaluationDocument
	}
	if err := engine.DecodeStrict(cmd, &c); err != nil {
		return nil, badf("evaluate: %v", err)
	}
	if len(c.Outcomes) == 0 {
		return nil, badf("evaluate: the command carries the grader's outcomes, and has none")
	}
	if err := engine.CheckOutcomes(c.Outcomes); err != nil {
		return nil, badf("evaluate %s: %v", c.ID, err)
	}
	svc, err := m.ingestion(ctx, world)
	if err != nil {
		return nil, err
	}
	s, err := m.state(ctx, world, true)
	if err != nil {
		return nil, err
	}
	ev, err := c.Evaluation(s)
	if err != nil {
		return nil, err
	}
	return m.gate(svc).Evaluate(ctx, m.principal(), ev, func(context.Context, engine.Subject) ([]engine.Outcome, error) {
		return c.Outcomes, nil
	})
}

// command runs one ctl command line of world ("" for the root ctl).
func (m *Mount) command(ctx context.Context, world string, line []byte) (any, error) {
	var head struct {
		Op string `json:"op"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrBadCommand, err)
	}
	ops := rootOps
	if world != "" {
		ops = worldOps
	}
	op, ok := ops[head.Op]
	if !ok {
		names := make([]string, 0, len(ops))
		for n := range ops {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w: unknown op %q (this ctl takes %s)", ErrBadCommand, head.Op, strings.Join(names, ", "))
	}
	res, err := op(ctx, m, world, line)
	if err == nil {
		m.refresh(ctx)
	}
	return res, err
}

// refresh brings every snapshot the mount reads up to date after a
// command succeeded, so that what a ctl write did shows at once (not only
// within the freshness bound).
func (m *Mount) refresh(ctx context.Context) {
	m.mu.Lock()
	m.mu.worldsAt = time.Time{}
	cats := make([]*index.Catalog, 0, len(m.mu.cats))
	for _, c := range m.mu.cats {
		cats = append(cats, c)
	}
	m.mu.Unlock()
	for _, c := range cats {
		_, _ = c.Exact(ctx) // a failure here only leaves the snapshot to age out
	}
}

// decode reads a command's arguments strictly (engine.DecodeStrict: no
// unknown field, no key twice, nothing after the object).
func decode[T any](cmd []byte) (T, error) {
	var v T
	if err := engine.DecodeStrict(cmd, &v); err != nil {
		return v, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return v, nil
}

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadCommand, fmt.Sprintf(format, args...))
}

// writer is a world's writer held by this mount. engine.World is not safe
// for concurrent use: mu serializes commands.
type writer struct {
	mu sync.Mutex
	w  *engine.World
	// next holds the frames the next tick installs (by archetype), set by
	// commit_tick under mu.
	next map[string]*engine.Frame
}

// hold makes w the world's writer in this mount, closing a previous one.
func (m *Mount) hold(w *engine.World) error {
	wr := &writer{w: w}
	if err := w.AddProcessor(func(tc *engine.TickContext) error {
		for name, f := range wr.next {
			*tc.Frame(name) = *f.Clone()
		}
		return nil
	}); err != nil {
		w.Close()
		return err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		w.Close()
		return index.ErrClosed
	}
	old := m.mu.writers[w.ID()]
	m.mu.writers[w.ID()] = wr
	m.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		old.w.Close()
		old.mu.Unlock()
	}
	return nil
}

type tableSpec struct {
	Name       string             `json:"name"`
	Components []engine.Component `json:"components"`
}

func opCreate(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op         string      `json:"op"`
		World      string      `json:"world"`
		Tables     []tableSpec `json:"tables"`
		WriterMode string      `json:"writer_mode"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if err := index.ValidateWorldID(c.World); err != nil {
		return nil, badf("world: %v", err)
	}
	if c.WriterMode != "" && c.WriterMode != index.ModeResumable && c.WriterMode != index.ModeCleanupOnly {
		return nil, badf("writer_mode %q: %s or %s", c.WriterMode, index.ModeResumable, index.ModeCleanupOnly)
	}
	if len(c.Tables) == 0 {
		return nil, badf("create %s: declare at least one table", c.World)
	}
	if err := m.absent(ctx, c.World); err != nil {
		return nil, err
	}
	var tables []*engine.Table
	for _, ts := range c.Tables {
		var comps []engine.Component
		for _, cs := range ts.Components {
			comp, err := engine.NewComponent(cs.Name, cs.Fields...)
			if err != nil {
				return nil, badf("table %s: %v", ts.Name, err)
			}
			comps = append(comps, comp)
		}
		t, err := engine.NewTable(ts.Name, comps...)
		if err != nil {
			return nil, badf("%v", err)
		}
		tables = append(tables, t)
	}
	opts := m.opts.Writer
	opts.WriterMode = c.WriterMode
	w, err := engine.CreateWorld(ctx, m.b, c.World, tables, opts)
	if err != nil {
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "writer_epoch": w.Epoch()}, nil
}

// absent refuses a world name that is taken, before anything is written
// (engine's create and fork refuse it too, at the marker; this answers
// without opening a catalog).
func (m *Mount) absent(ctx context.Context, world string) error {
	ok, err := m.worldExists(ctx, world)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("world %s: %w", world, index.ErrWorldExists)
	}
	return nil
}

func opFork(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op     string `json:"op"`
		World  string `json:"world"`
		Parent string `json:"parent"`
		Run    string `json:"run"`
		Tick   *int64 `json:"tick"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if c.Run == "" {
		c.Run = "main"
	}
	if err := index.ValidateWorldID(c.World); err != nil {
		return nil, badf("world: %v", err)
	}
	if err := index.ValidateRunName(c.Run); err != nil {
		return nil, badf("fork %s: %v", c.World, err)
	}
	if c.Tick == nil {
		return nil, badf("fork %s: give the tick of %s to fork from", c.World, c.Parent)
	}
	if err := m.absent(ctx, c.World); err != nil {
		return nil, err
	}
	if ok, err := m.worldExists(ctx, c.Parent); err != nil {
		return nil, err
	} else if !ok {
		return nil, badf("fork %s: parent world %q does not exist", c.World, c.Parent)
	}
	if _, ok, err := m.tick(ctx, c.Parent, c.Run, *c.Tick); err != nil {
		return nil, err
	} else if !ok {
		return nil, badf("fork %s: tick %d of %s run %s is not visible", c.World, *c.Tick, c.Parent, c.Run)
	}
	tables, err := m.declaredTables(ctx, c.Parent)
	if err != nil {
		return nil, err
	}
	w, err := engine.ForkWorld(ctx, m.b, c.Parent, c.World, c.Run, *c.Tick, tables, m.opts.Writer)
	if err != nil {
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "parent": c.Parent, "fork_run": c.Run, "fork_tick": *c.Tick, "writer_epoch": w.Epoch()}, nil
}

func opResume(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op    string `json:"op"`
		World string `json:"world"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if ok, err := m.worldExists(ctx, c.World); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("resume %q: %w", c.World, index.ErrNoWorld)
	}
	tables, err := m.declaredTables(ctx, c.World)
	if err != nil {
		return nil, err
	}
	w, err := engine.ResumeWorld(ctx, m.b, c.World, tables, m.opts.Writer)
	if err != nil {
		return nil, err
	}
	if err := m.hold(w); err != nil {
		return nil, err
	}
	return map[string]any{"world": c.World, "writer_epoch": w.Epoch(), "tick": w.Tick()}, nil
}

// declaredTables rebuilds a world's tables from the descriptions it keeps
// in the bucket (legacy tables are never written again, so they are left
// out). Each rebuilt table must hash to its recorded id.
func (m *Mount) declaredTables(ctx context.Context, world string) ([]*engine.Table, error) {
	prefix := strings.TrimSuffix(engine.TableInfoPath(world, "x"), "x.json")
	var out []*engine.Table
	for a, err := range m.b.List(ctx, prefix, "") {
		if err != nil {
			return nil, err
		}
		id := strings.TrimSuffix(strings.TrimPrefix(a.Name, prefix), ".json")
		info, err := m.tableInfo(ctx, world, id)
		if err != nil {
			return nil, err
		}
		t, err := engine.TableFromInfo(info)
		if err != nil {
			return nil, fmt.Errorf("world %s: %w", world, err)
		}
		if !t.Legacy() && !engine.IsFactTable(t) { // facts are not archetypes
			out = append(out, t)
		}
	}
	return out, nil
}

func opCommitTick(ctx context.Context, m *Mount, world string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op     string                     `json:"op"`
		Tick   *int64                     `json:"tick"`
		Frames map[string]json.RawMessage `json:"frames"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	wr := m.mu.writers[world]
	m.mu.Unlock()
	if wr == nil {
		return nil, fmt.Errorf("world %s: %w; write {\"op\":\"resume\",\"world\":%q} to the root ctl first", world, ErrNoWriter, world)
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	next := wr.w.Tick() + 1
	if c.Tick != nil && *c.Tick != next {
		if *c.Tick < next {
			return nil, fmt.Errorf("world %s: tick %d: %w", world, *c.Tick, &index.CatalogConflictError{World: world, Run: "main", Tick: *c.Tick})
		}
		return nil, badf("world %s: tick %d given, the next tick is %d", world, *c.Tick, next)
	}
	if len(c.Frames) == 0 {
		return nil, badf("commit_tick: no frames (give \"frames\": {ARCHETYPE: rows or a file path})")
	}
	frames := map[string]*engine.Frame{}
	for name, raw := range c.Frames {
		i := slices.IndexFunc(wr.w.Tables(), func(t *engine.Table) bool { return t.Name == name })
		if i < 0 {
			var names []string
			for _, t := range wr.w.Tables() {
				names = append(names, t.Name)
			}
			return nil, badf("world %s has no archetype %q (it has %s)", world, name, strings.Join(names, ", "))
		}
		f, err := frameOf(ctx, wr.w.Tables()[i], raw)
		if err != nil {
			return nil, err
		}
		frames[name] = f
	}
	wr.next = frames
	defer func() { wr.next = nil }()
	return wr.w.Step(ctx)
}

// frameOf builds an archetype's whole frame from rows given inline or as a
// path to a Parquet or JSONL file, every row checked and converted exactly
// by engine.InputRow (JSON numbers are decoded as numbers, never through
// float64). A row's entity_id and every component column are required; its
// commit columns (tick, commit_token, writer_epoch), as in a snapshot
// file, are ignored: the new tick stamps its own.
func frameOf(ctx context.Context, t *engine.Table, raw json.RawMessage) (*engine.Frame, error) {
	var rows []map[string]any
	var path string
	if err := json.Unmarshal(raw, &path); err == nil {
		if !filepath.IsAbs(path) {
			return nil, badf("%s: %q: give an absolute path (the mount has no working directory of yours)", t.Name, path)
		}
		if rows, err = readRowsAsCaller(ctx, path); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	} else if err := engine.DecodeStrict(raw, &rows); err != nil {
		return nil, badf("%s: frames are an array of row objects or a file path: %v", t.Name, err)
	}
	f := engine.NewFrame(t)
	for i, row := range rows {
		e, v, err := engine.InputRow(t, row)
		if err == nil {
			err = f.Insert(e, v)
		}
		if err != nil {
			return nil, badf("%s row %d: %v", t.Name, i, err)
		}
	}
	return f, nil
}

// ctlFile is a ctl file: each write is one command, answered (after it is
// durable) on the same open file. It is the mount owner's: mode 0600, or
// 0660 with Options.CtlGroup as its group.
type ctlFile struct {
	gofs.Inode
	m     *Mount
	ino   uint64
	world string // "" for the root ctl
}

var (
	_ = (gofs.NodeGetattrer)((*ctlFile)(nil))
	_ = (gofs.NodeSetattrer)((*ctlFile)(nil))
	_ = (gofs.NodeOpener)((*ctlFile)(nil))
	_ = (gofs.NodeSetxattrer)((*ctlFile)(nil))
	_ = (gofs.NodeRemovexattrer)((*ctlFile)(nil))
)

func (c *ctlFile) immutable() bool { return false }
func (c *ctlFile) inode() uint64   { return c.ino }

func (c *ctlFile) fill(_ context.Context, a *fuse.Attr) syscall.Errno {
	// The owner is the mount's (go-fuse fills Uid in from the mount).
	a.Mode = syscall.S_IFREG | 0o600
	if gid := c.m.opts.ctlGID; gid >= 0 {
		a.Mode, a.Gid = syscall.S_IFREG|0o660, uint32(gid)
	}
	a.Nlink = 1
	a.Ino = c.ino
	setTimes(a, c.m.startedMs)
	return 0
}

func (c *ctlFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c.m.setAttrTimeout(out, false)
	return c.fill(ctx, &out.Attr)
}

// Setattr admits only the truncation a shell's "> ctl" does.
func (c *ctlFile) Setattr(ctx context.Context, _ gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); !ok || sz != 0 || in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		return syscall.EROFS
	}
	return c.fill(ctx, &out.Attr)
}

func (c *ctlFile) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (c *ctlFile) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

func (c *ctlFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	h := &ctlHandle{m: c.m, world: c.world}
	h.mu.endOff = -1
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// ctlHandle is an open ctl file. Reads return the answer to the last
// command written on it, once, from its start.
//
// The kernel hands a write(2) larger than the mount's max_write over in
// pieces, one request each, and stops at the first piece refused: the
// pieces before it were accepted, so the caller sees a short write and
// (cat, Python, Go all do) writes the rest again. Every refusal is
// therefore made on the earliest piece that shows it, and a piece that
// continued a command when it was refused is remembered: the same bytes
// written again at the same offset are that retry, and get the same errno
// instead of running as a command of their own.
type ctlHandle struct {
	m     *Mount
	world string

	mu struct {
		sync.Mutex
		pending []byte // a command split across writes, not yet complete
		scan    cmdScanner
		answer  []byte
		read    int // how much of answer was read
		// refused is the piece that failed a command it continued (errno
		// 0: none); retry is disarmed by the next write, matching or not.
		refused struct {
			off   int64
			piece []byte
			errno syscall.Errno
		}
		// endOff is where the last command ended without its newline
		// (-1: none): pieces of only whitespace there are its newline.
		endOff int64
	}
}

var (
	_ = (gofs.FileWriter)((*ctlHandle)(nil))
	_ = (gofs.FileReader)((*ctlHandle)(nil))
	_ = (gofs.FileFlusher)((*ctlHandle)(nil))
)

// maxCommand bounds a command's bytes up to the end of its JSON object
// (frames larger than this go in a file).
const maxCommand = 64 << 20

// Answer is what a ctl read returns: one JSON line.
type Answer struct {
	OK     bool   `json:"ok"`
	Result any    `json:"result,omitempty"`
	Errno  string `json:"errno,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (h *ctlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	start := time.Now()
	defer h.m.stats.op("ctl", start)
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := &h.mu.refused; r.errno != 0 {
		errno, retry := r.errno, off == r.off && sharePrefix(data, r.piece)
		r.errno, r.piece = 0, nil
		if retry {
			return 0, errno
		}
	}
	if len(h.mu.pending) == 0 && off == h.mu.endOff && len(bytes.TrimSpace(data)) == 0 {
		h.mu.endOff += int64(len(data))
		return uint32(len(data)), 0 // the newline of a command an earlier piece completed
	}
	continued := len(h.mu.pending) > 0
	complete, err := h.mu.scan.feed(data)
	size := int64(len(h.mu.pending) + len(data))
	if complete {
		size = h.mu.scan.end // what follows the object is its newline
	}
	if err == nil && size > maxCommand {
		err = badf("a command is at most %d MiB (give larger frames as a file path)", maxCommand>>20)
	}
	if err == nil && !complete {
		h.mu.pending = append(h.mu.pending, data...)
		return uint32(len(data)), 0
	}
	line := bytes.TrimSpace(append(h.mu.pending, data...))
	h.mu.pending, h.mu.scan, h.mu.endOff = nil, cmdScanner{}, -1
	var res any
	if err == nil {
		// A command, once started, runs to its end: a signal to the
		// writer (which interrupts the request) must not leave a commit
		// half done, nor make the kernel restart a write that committed.
		res, err = h.m.command(finish(ctx), h.world, line)
	}
	a := Answer{OK: err == nil, Result: res}
	if err != nil {
		a.Errno, a.Error = errnoName(Errno(err)), err.Error()
	}
	h.mu.answer, _ = json.Marshal(a)
	h.mu.answer = append(h.mu.answer, '\n')
	h.mu.read = 0
	if err != nil {
		errno := Errno(err)
		if continued {
			h.mu.refused.off, h.mu.refused.piece, h.mu.refused.errno = off, bytes.Clone(data), errno
		}
		return 0, errno
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		h.mu.endOff = off + int64(len(data))
	}
	return uint32(len(data)), 0
}

// sharePrefix reports whether a and b agree on their common length (the
// kernel may cut a retried write at other places than the first).
func sharePrefix(a, b []byte) bool {
	n := min(len(a), len(b))
	return n > 0 && bytes.Equal(a[:n], b[:n])
}

func (h *ctlHandle) Read(_ context.Context, dest []byte, _ int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(dest, h.mu.answer[h.mu.read:])
	h.mu.read += n
	return fuse.ReadResultData(dest[:n]), 0
}

// Flush reports a command left incomplete when the file is closed.
func (h *ctlHandle) Flush(context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(bytes.TrimSpace(h.mu.pending)) > 0 {
		h.mu.pending, h.mu.scan = nil, cmdScanner{}
		return syscall.EINVAL
	}
	return 0
}

// cmdScanner follows a command's bytes as they arrive, so that a command
// is known complete when its JSON object closes and bytes that cannot
// continue one JSON object on one line are refused on the piece that
// carries them. It checks the structure (brackets, strings, escapes, the
// bytes allowed between tokens); the command's decoder checks the rest.
type cmdScanner struct {
	n       int64  // bytes seen
	end     int64  // the command's bytes, once done
	stack   []byte // open brackets
	started bool
	done    bool
	inStr   bool
	esc     bool
	hex     int // hex digits still due in a \u escape
}

// maxDepth bounds a command's nesting.
const maxDepth = 1000

func (s *cmdScanner) feed(p []byte) (complete bool, err error) {
	for _, c := range p {
		at := s.n
		s.n++
		switch {
		case s.done:
			if !isSpace(c) {
				return false, badf("one command per write: %q follows the end of the command's JSON object (byte %d)", c, at)
			}
		case s.inStr:
			switch {
			case s.hex > 0:
				if !isHex(c) {
					return false, badf("byte %d: %q in a \\u escape", at, c)
				}
				s.hex--
			case s.esc:
				s.esc = false
				switch c {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					s.hex = 4
				default:
					return false, badf("byte %d: invalid escape \\%c", at, c)
				}
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
			case c == '\n':
				return false, badf("byte %d: the line ended inside a string (a command is one JSON object on one line)", at)
			case c < 0x20:
				return false, badf("byte %d: control byte %q inside a string", at, c)
			}
		case !s.started:
			switch {
			case c == '\n':
				return false, badf("empty command (a command is one JSON object on one line)")
			case isSpace(c):
			case c != '{':
				return false, badf("a command is a JSON object, beginning with '{', not %q", c)
			default:
				s.started = true
				s.stack = append(s.stack, c)
			}
		default:
			switch c {
			case '{', '[':
				if len(s.stack) >= maxDepth {
					return false, badf("byte %d: nested deeper than %d", at, maxDepth)
				}
				s.stack = append(s.stack, c)
			case '}', ']':
				open := byte('{')
				if c == ']' {
					open = '['
				}
				if s.stack[len(s.stack)-1] != open {
					return false, badf("byte %d: %q closes %q", at, c, s.stack[len(s.stack)-1])
				}
				s.stack = s.stack[:len(s.stack)-1]
				if len(s.stack) == 0 {
					s.done, s.end = true, s.n
				}
			case '"':
				s.inStr = true
			case '\n':
				return false, badf("byte %d: the line ended before the command's JSON object did (a command is one JSON object on one line)", at)
			case ' ', '\t', '\r', ',', ':':
			default:
				if !isLiteral(c) {
					return false, badf("byte %d: %q cannot appear in JSON outside a string", at, c)
				}
			}
		}
	}
	return s.done, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isLiteral: a byte of a number, true, false or null.
func isLiteral(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}

func errnoName(e syscall.Errno) string {
	names := map[syscall.Errno]string{syscall.EINVAL: "EINVAL", syscall.ESTALE: "ESTALE", syscall.EEXIST: "EEXIST",
		syscall.EAGAIN: "EAGAIN", syscall.EIO: "EIO", syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES", syscall.EINTR: "EINTR"}
	if n, ok := names[e]; ok {
		return n
	}
	return e.Error()
}
