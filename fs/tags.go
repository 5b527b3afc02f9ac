package fs

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/worldfs/worldfs/index"
)

// opTag names a visible tick of a world (index.Catalog.Tag):
// {"op":"tag","world":W,"run":"main"?,"at":POINT,"name":N,"message":M?}.
// POINT is any point (index.ParseMoment): 170, head, head~10, a commit
// token, a time, another tag. The answer is the tag.
func opTag(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op      string `json:"op"`
		World   string `json:"world"`
		Run     string `json:"run"`
		At      string `json:"at"`
		Name    string `json:"name"`
		Message string `json:"message"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if c.Run == "" {
		c.Run = index.DefaultRun
	}
	if err := index.ValidateRunName(c.Run); err != nil {
		return nil, badf("tag %s: %v", c.Name, err)
	}
	if err := index.ValidateTagName(c.Name); err != nil {
		return nil, badf("%v", err)
	}
	if len(c.Message) > index.MaxTagMessage {
		return nil, badf("tag %s: the message is %d bytes, over the %d a tag's message may have", c.Name, len(c.Message), index.MaxTagMessage)
	}
	at, err := index.ParseMomentOrTag(c.At, time.Now())
	if err != nil {
		return nil, badf("tag %s: at: %v", c.Name, err)
	}
	cat, err := m.existing(ctx, "tag", c.World)
	if err != nil {
		return nil, err
	}
	return cat.Tag(ctx, index.LoadFrom(m.b), c.Run, at, c.Name, c.Message)
}

// opUntag deletes a world's tag: {"op":"untag","world":W,"name":N}. The
// answer is the tag deleted.
func opUntag(ctx context.Context, m *Mount, _ string, cmd []byte) (any, error) {
	c, err := decode[struct {
		Op    string `json:"op"`
		World string `json:"world"`
		Name  string `json:"name"`
	}](cmd)
	if err != nil {
		return nil, err
	}
	if c.Name == "" {
		return nil, badf("untag: give the tag's name")
	}
	cat, err := m.existing(ctx, "untag", c.World)
	if err != nil {
		return nil, err
	}
	return cat.Untag(ctx, c.Name)
}

// existing returns the catalog of world, which must exist (op names the
// command, for the error).
func (m *Mount) existing(ctx context.Context, op, world string) (*index.Catalog, error) {
	if ok, err := m.worldExists(ctx, world); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("%s %q: %w", op, world, index.ErrNoWorld)
	}
	return m.catalog(ctx, world)
}

// tagsDir is runs/<run>/tags/: a link per tag of the world that names a
// visible tick of the run, to that tick's directory (../ticks/<N>). A tag
// made or deleted shows within the mount's freshness, as head does.
type tagsDir struct {
	dirBase
	world, run string
}

var (
	_ = (gofs.NodeLookuper)((*tagsDir)(nil))
	_ = (gofs.NodeReaddirer)((*tagsDir)(nil))
)

func (d *tagsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	tags, err := d.m.runTags(ctx, d.world, d.run)
	if err != nil {
		return nil, d.m.errno("tags of "+d.world, err)
	}
	out := make([]fuse.DirEntry, 0, len(tags))
	for _, t := range tags {
		out = append(out, dirEntry(t.Name, syscall.S_IFLNK, ino(d.world, "runs", d.run, "tags", t.Name)))
	}
	return list(out)
}

func (d *tagsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	l := &tagLink{m: d.m, ino: ino(d.world, "runs", d.run, "tags", name), world: d.world, run: d.run, name: name}
	if _, _, errno := l.resolve(ctx); errno != 0 {
		return nil, errno
	}
	return d.m.child(ctx, d.EmbeddedInode(), l, out)
}

// runTags returns the tags of world that name a visible tick of run, by
// name: read cold if the mount has not opened world's catalog (the
// checkpoint and the log after it, no tick part), else from the catalog;
// each tick is looked up as ticks/ looks it up.
func (m *Mount) runTags(ctx context.Context, world, run string) ([]index.Tag, error) {
	var all []index.Tag
	if cold, err := m.withCold(ctx, world, index.Want{From: 1, To: 0}, m.opts.Freshness, func(p *index.Partial) error {
		all = p.Tags()
		return nil
	}); err != nil {
		return nil, err
	} else if !cold {
		s, err := m.state(ctx, world, false)
		if err != nil {
			return nil, err
		}
		all = s.Tags()
	}
	var out []index.Tag
	for _, tg := range all {
		if tg.Run != run {
			continue
		}
		t, ok, err := m.tick(ctx, world, run, tg.Tick)
		if err != nil {
			return nil, err
		}
		if ok && t.CommitToken == tg.CommitToken {
			out = append(out, tg)
		}
	}
	return out, nil
}

// tagLink is runs/<run>/tags/<name>: a link to the tick the tag names.
type tagLink struct {
	gofs.Inode
	m                *Mount
	ino              uint64
	world, run, name string
}

var (
	_ = (gofs.NodeReadlinker)((*tagLink)(nil))
	_ = (gofs.NodeGetattrer)((*tagLink)(nil))
)

func (l *tagLink) immutable() bool { return false } // a tag may be deleted, and its name taken again
func (l *tagLink) inode() uint64   { return l.ino }

// resolve returns the link's target and when the tag was made.
func (l *tagLink) resolve(ctx context.Context) ([]byte, int64, syscall.Errno) {
	tags, err := l.m.runTags(ctx, l.world, l.run)
	if err != nil {
		return nil, 0, l.m.errno("tags of "+l.world, err)
	}
	i := slices.IndexFunc(tags, func(t index.Tag) bool { return t.Name == l.name })
	if i < 0 {
		return nil, 0, syscall.ENOENT
	}
	return appendTickName([]byte("../ticks/"), tags[i].Tick), tags[i].CreatedUnixMs, 0
}

func (l *tagLink) fill(ctx context.Context, a *fuse.Attr) syscall.Errno {
	target, ms, errno := l.resolve(ctx)
	if errno != 0 {
		return errno
	}
	a.Mode = syscall.S_IFLNK | 0o777
	a.Nlink = 1
	a.Size = uint64(len(target))
	a.Ino = l.ino
	setTimes(a, ms)
	return 0
}

func (l *tagLink) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.m.setAttrTimeout(out, false)
	return l.fill(ctx, &out.Attr)
}

func (l *tagLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	target, _, errno := l.resolve(ctx)
	return target, errno
}
