package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/engine"
)

// A ctl command is one JSON object on one line: {"op": NAME, ...}. Each
// op decodes its own arguments strictly (an unknown field is EINVAL) and
// checks them before anything is written, so a malformed command commits
// nothing. Adding a command is one entry in one of these tables.
type ctlOp func(ctx context.Context, m *Mount, world string, cmd []byte) (any, error)

// rootOps are the commands of <mount>/ctl.
var rootOps = map[string]ctlOp{
	"create": opCreate, // {"op":"create","world":W,"tables":[{"name":A,"components":[{"name":C,"fields":[{"name":F,"type":T}]}],"fact":false?}],"meta":{K:V}?}
	"fork":   opFork,   // {"op":"fork","world":CHILD,"parent":P,"run":"main","tick":N,"meta":{K:V}?}
	"resume": opResume, // {"op":"resume","world":W}
	"status": opStatus, // {"op":"status","world":W,"status":"active"|"archived"?,"writer_mode":"cleanup_only"?}
	"tag":    opTag,    // {"op":"tag","world":W,"run":"main"?,"at":POINT,"name":N,"message":M?}
	"untag":  opUntag,  // {"op":"untag","world":W,"name":N}
}

// worldOps are the commands of <mount>/<world>/ctl.
var worldOps = map[string]ctlOp{
	"commit_tick": opCommitTick, // {"op":"commit_tick","tick":N?,"frames":{A:[{"entity_id":E,COL:V…}…] or A:"/path.parquet|.jsonl"}}
	"ingest":      opIngest,     // {"op":"ingest","producer":P,"external_id":X,"table":T,"components":{C:{F:V…}},"create_table":false?} (engine.FactDocument)
	"evaluate":    opEvaluate,   // {"op":"evaluate","id":E,"at":N?,"selector":{…},"contract":{…},"outcomes":[…]} (engine.EvaluationDocument)
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
	m.mu.coldsStale = time.Now() // a world read cold is brought to its tip again
	cats := m.cats.Values()
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

func (c *ctlFile) inode() uint64 { return c.ino }

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
const maxCommand = engine.MaxInputDocument

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
		h.m.refusals.add(ctx, h.world, line, err)
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
func (h *ctlHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if line := bytes.TrimSpace(h.mu.pending); len(line) > 0 {
		h.mu.pending, h.mu.scan = nil, cmdScanner{}
		h.m.refusals.add(ctx, h.world, line, badf("the file was closed in the middle of a command (its JSON object never closed)"))
		return syscall.EINVAL
	}
	return 0
}

func errnoName(e syscall.Errno) string {
	names := map[syscall.Errno]string{syscall.EINVAL: "EINVAL", syscall.ESTALE: "ESTALE", syscall.EEXIST: "EEXIST",
		syscall.EAGAIN: "EAGAIN", syscall.EIO: "EIO", syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES", syscall.EINTR: "EINTR"}
	if n, ok := names[e]; ok {
		return n
	}
	return e.Error()
}
