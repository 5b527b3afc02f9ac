package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ctlErrorsName is the file beside each ctl file that tells a writer why
// its commands were refused (SEMANTICS.md, "ctl commands"). A shell's
// `echo '{…}' > ctl` shows only the errno ("write error: Invalid
// argument"): the answer that names the reason is read on the same open
// file, which a redirection closes. So every refusal is also kept here,
// where a plain `cat` reads it afterwards.
const ctlErrorsName = "ctl.errors"

// Bounds of what the mount keeps of refusals: the newest keptRefusals per
// (ctl file, user), each reason cut at maxReasonBytes, and at most
// maxRefusalKeys such lists (the list refused longest ago goes first).
const (
	keptRefusals   = 16
	maxReasonBytes = 4 << 10
	maxRefusalKeys = 4096
)

// refusal is one command a ctl file refused.
type refusal struct {
	at    time.Time
	pid   uint32
	op    string // the command's op, if it had one
	errno syscall.Errno
	err   string
}

// refusalKey is whose refusals a list holds: those of one ctl file (its
// world, "" for the root ctl) written by one user. Each user reads only
// their own, so one user's mistake never shows up as another's.
type refusalKey struct {
	world string
	uid   uint32
}

// refusals are the refusals of this mount's ctl files, by ctl file and
// user.
type refusals struct {
	mu struct {
		sync.Mutex
		// INVARIANT: len(by) <= maxRefusalKeys; each list holds at most
		// keptRefusals, oldest first.
		by map[refusalKey][]refusal
	}
}

// add records that the ctl file of world refused the command line (which
// may be partial or malformed) of the caller ctx carries, with err.
func (r *refusals) add(ctx context.Context, world string, line []byte, err error) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return // not a request through the mount (Mount.Command): its caller has the error
	}
	var head struct {
		Op string `json:"op"`
	}
	_ = json.Unmarshal(line, &head) // a malformed command has no op to name
	reason := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes] + "…"
	}
	rf := refusal{at: time.Now(), pid: callerProcess(c.Pid), op: head.Op, errno: Errno(err), err: reason}
	k := refusalKey{world: world, uid: c.Uid}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.by == nil {
		r.mu.by = map[refusalKey][]refusal{}
	}
	if _, ok := r.mu.by[k]; !ok && len(r.mu.by) >= maxRefusalKeys {
		var oldest refusalKey
		var at time.Time
		for k, l := range r.mu.by {
			if last := l[len(l)-1].at; at.IsZero() || last.Before(at) {
				oldest, at = k, last
			}
		}
		delete(r.mu.by, oldest)
	}
	l := append(r.mu.by[k], rf)
	if len(l) > keptRefusals {
		l = append([]refusal(nil), l[len(l)-keptRefusals:]...)
	}
	r.mu.by[k] = l
}

// text is what the caller ctx carries reads of the ctl.errors of world:
// its own refusals, oldest first, one line each, and the time of the
// newest (zero: none).
func (r *refusals) text(ctx context.Context, world string) ([]byte, time.Time) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return nil, time.Time{}
	}
	r.mu.Lock()
	l := r.mu.by[refusalKey{world: world, uid: c.Uid}]
	r.mu.Unlock()
	var sb strings.Builder
	for _, rf := range l {
		op := rf.op
		if op == "" {
			op = "-"
		}
		fmt.Fprintf(&sb, "%s pid %d %s %s: %s\n", rf.at.UTC().Format("2006-01-02T15:04:05.000Z"), rf.pid, op, errnoName(rf.errno), rf.err)
	}
	if len(l) == 0 {
		return nil, time.Time{}
	}
	return []byte(sb.String()), l[len(l)-1].at
}

// ctlErrorsFile is the ctl.errors file of a ctl file: what text gives its
// reader. Its size and bytes are the reader's own, so the kernel keeps
// neither its attributes nor its pages (attribute timeout 0, direct I/O).
type ctlErrorsFile struct {
	bytesFile
}

var (
	_ = (gofs.NodeGetattrer)((*ctlErrorsFile)(nil))
	_ = (gofs.NodeOpener)((*ctlErrorsFile)(nil))
)

// ctlErrors returns the ctl.errors node of the ctl file of world ("" for
// the root ctl).
func (m *Mount) ctlErrors(world string, ino uint64) *ctlErrorsFile {
	return &ctlErrorsFile{bytesFile{m: m, ino: ino,
		when: func(ctx context.Context) int64 {
			if _, at := m.refusals.text(ctx, world); !at.IsZero() {
				return at.UnixMilli()
			}
			return m.startedMs
		},
		content: func(ctx context.Context) ([]byte, error) {
			data, _ := m.refusals.text(ctx, world)
			return data, nil
		}}}
}

func (f *ctlErrorsFile) attrTimeout() time.Duration { return 0 }

func (f *ctlErrorsFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.SetTimeout(0)
	return f.fill(ctx, &out.Attr)
}
