package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Tags: names of (run, tick) points of a world, recorded in its catalog
// (docs/ARCHITECTURE.md, "The catalog"). A tag is created by a
// tag.create entry and deleted by a tag.delete entry (TagOp): both are
// records of the create-only log, so a tag is visible to every reader as
// soon as its slot lands, and the log decides between two writers that
// take one name at once. This file holds what a state keeps of them, how
// they apply, and the one function that tags a point (Catalog.Tag).

// Tag is a tag as the state holds it.
type Tag struct {
	Name string `json:"name"`
	// Run, Tick and CommitToken name the tagged tick: visible in the
	// world's view of Run when it was tagged (an ancestor's, for a tick a
	// fork inherits).
	Run         string `json:"run"`
	Tick        int64  `json:"tick"`
	CommitToken string `json:"commit_token"`
	Message     string `json:"message,omitempty"`
	Holder      string `json:"holder,omitempty"`
	// CreatedUnixMs is the tagger's clock, recorded as data.
	CreatedUnixMs int64 `json:"created_unix_ms"`
	// Seq is the sequence of the entry that created it.
	Seq uint64 `json:"seq"`
}

// TagOp is the payload of the two tag entries.
//
//   - tag.create: Name becomes the tag of tick Tick of Run, published
//     under CommitToken. A name the world's tags already hold is refused
//     (TagExistsError), so of two writers taking one name at once the
//     log's order lets exactly one win. A tick of the world's own history
//     must be published under CommitToken (a tick a fork inherits is
//     checked against the lineage by Catalog.Tag before the entry).
//   - tag.delete: the tag Name is gone; the name may be taken again. A
//     name the world's tags do not hold is refused (ErrNoTag).
type TagOp struct {
	Name        string `json:"name"`
	Run         string `json:"run,omitempty"`
	Tick        int64  `json:"tick,omitempty"`
	CommitToken string `json:"commit_token,omitempty"`
	Message     string `json:"message,omitempty"`
	Holder      string `json:"holder,omitempty"`
	// NowMs is the caller's clock, recorded as data so that Apply stays
	// deterministic.
	NowMs int64 `json:"now_ms"`
}

// Bounds of a tag.
const (
	// MaxTagNameLen bounds a tag's name.
	MaxTagNameLen = 64
	// MaxTagMessage bounds a tag's message, in bytes.
	MaxTagMessage = 4096
)

// TagPrefix marks a point that names a tag (ParseMoment): tag:NAME.
const TagPrefix = "tag:"

// ValidateTagName checks a tag's name: 1 to MaxTagNameLen characters
// from [a-z0-9._-], starting with a letter, and no name that a point
// already reads as something else (head, now, a commit token): a tag is
// one path segment on the mount (runs/<run>/tags/<name>) and a point of
// its own (W@NAME, --at tag:NAME).
func ValidateTagName(name string) error {
	const rule = "a tag's name is 1 to 64 characters of a-z 0-9 . _ -, starting with a letter"
	switch {
	case name == "":
		return fmt.Errorf("a tag needs a name (%s)", rule)
	case strings.Contains(name, "/"):
		return fmt.Errorf("tag name %q has a '/': a tag is one name, a file of runs/<run>/tags/ on the mount (%s)", name, rule)
	case len(name) > MaxTagNameLen:
		return fmt.Errorf("tag name %q is %d characters, over the %d a tag may have", name, len(name), MaxTagNameLen)
	case !(name[0] >= 'a' && name[0] <= 'z'):
		return fmt.Errorf("tag name %q: %s", name, rule)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("tag name %q: character %q is not allowed (%s)", name, r, rule)
		}
	}
	if m, err := ParseMoment(name, time.Now()); err == nil && m.Tag == "" {
		return fmt.Errorf("tag name %q reads as a point of its own (%s); choose a name no point takes", name, MomentForms)
	}
	return nil
}

// TagExistsError: a tag.create of a name the world's tags hold.
type TagExistsError struct {
	World string
	Tag   Tag // the tag that holds the name
}

func (e *TagExistsError) Error() string {
	return fmt.Sprintf("world %s: tag %s is taken: it names run %s tick %d (tagged at %s); delete it first (worldfs tag --delete %s %s) or choose another name",
		e.World, e.Tag.Name, e.Tag.Run, e.Tag.Tick, time.UnixMilli(e.Tag.CreatedUnixMs).UTC().Format(time.RFC3339), e.World, e.Tag.Name)
}

// ErrNoTag: the world holds no tag of that name. It matches ErrNotFound.
var ErrNoTag = fmt.Errorf("no such tag: %w", ErrNotFound)

// Tags returns the world's tags, by name.
func (s *State) Tags() []Tag { return slices.Clone(s.tags) }

// Tag returns the tag called name (false: none).
func (s *State) Tag(name string) (Tag, bool) {
	i, ok := slices.BinarySearchFunc(s.tags, name, func(t Tag, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		return Tag{}, false
	}
	return s.tags[i], true
}

// validateTag checks a tag entry's payload.
func validateTag(kind Kind, op *TagOp) error {
	switch {
	case op == nil:
		return fmt.Errorf("%s without its payload", kind)
	case kind == KindTagDelete:
		if op.Name == "" {
			return fmt.Errorf("%s: needs the tag's name", kind)
		}
		return nil
	}
	if err := ValidateTagName(op.Name); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	switch {
	case op.Run == "" || op.CommitToken == "" || op.Tick < 0:
		return fmt.Errorf("%s %s: needs a run, a tick ≥ 0 and the tick's commit token", kind, op.Name)
	case len(op.Message) > MaxTagMessage:
		return fmt.Errorf("%s %s: the message is %d bytes, over the %d a tag's message may have", kind, op.Name, len(op.Message), MaxTagMessage)
	case !utf8.ValidString(op.Message):
		return fmt.Errorf("%s %s: the message is not UTF-8", kind, op.Name)
	}
	return nil
}

// checkTag refuses a new tag.create of a tick of the world's own history
// that is not published under the tag's token (a tick a fork inherits
// is its ancestor's: Catalog.Tag checks it through the lineage).
func (s *State) checkTag(op *TagOp) error {
	w := &s.World
	if w.Parent != "" && op.Tick <= w.ForkTick {
		return nil
	}
	t, ok := s.Tick(op.Run, op.Tick)
	if !ok || t.CommitToken != op.CommitToken {
		return refused("world %s: tick %d of run %s is not visible under commit %s: a tag names a visible tick", w.ID, op.Tick, op.Run, op.CommitToken)
	}
	return nil
}

// applyTag applies tag.create and tag.delete: see TagOp.
func (n *State) applyTag(kind Kind, op *TagOp, seq uint64) error {
	i, found := slices.BinarySearchFunc(n.tags, op.Name, func(t Tag, name string) int { return strings.Compare(t.Name, name) })
	// The slice is shared with the states this one was cloned from: every
	// change copies it.
	switch kind {
	case KindTagCreate:
		if found {
			return &TagExistsError{World: n.World.ID, Tag: n.tags[i]}
		}
		n.tags = slices.Insert(slices.Clone(n.tags), i, Tag{Name: op.Name, Run: op.Run, Tick: op.Tick, CommitToken: op.CommitToken,
			Message: op.Message, Holder: op.Holder, CreatedUnixMs: op.NowMs, Seq: seq})
		return nil
	default: // KindTagDelete
		if !found {
			return fmt.Errorf("world %s: tag %s: %w", n.World.ID, op.Name, ErrNoTag)
		}
		n.tags = slices.Delete(slices.Clone(n.tags), i, i+1)
		return nil
	}
}

// TickOfTag resolves a tag of v's world among v's visible ticks up to
// upTo: its tick, if the tag names v's run and that tick is visible
// there under the tag's commit token. A tag the world does not hold, or
// of another run, or past upTo, is an error wrapping ErrNotFound.
func TickOfTag(v *View, name string, upTo int64) (TickRef, error) {
	if len(v.Segments) == 0 {
		return TickRef{}, fmt.Errorf("tag %s: %w", name, ErrNoTag)
	}
	own := v.Segments[len(v.Segments)-1].State
	tag, ok := own.Tag(name)
	if !ok {
		names := make([]string, 0, len(own.tags))
		for _, t := range own.tags {
			names = append(names, t.Name)
		}
		has := "it has no tag"
		if len(names) > 0 {
			has = "its tags: " + strings.Join(names, ", ")
		}
		return TickRef{}, fmt.Errorf("world %s has no tag %s (%s): %w", v.World, name, has, ErrNoTag)
	}
	if tag.Run != v.Run {
		return TickRef{}, fmt.Errorf("tag %s of world %s names run %s, not run %s: %w", name, v.World, tag.Run, v.Run, ErrNotFound)
	}
	if tag.Tick > upTo {
		return TickRef{}, fmt.Errorf("tag %s of world %s names tick %d, past tick %d the views are pinned to: %w", name, v.World, tag.Tick, upTo, ErrNotFound)
	}
	t, ok := v.Tick(tag.Tick)
	if !ok || t.CommitToken != tag.CommitToken {
		return TickRef{}, fmt.Errorf("tag %s of world %s names tick %d of run %s, which is not visible: %w", name, v.World, tag.Tick, v.Run, ErrNotFound)
	}
	return t, nil
}

// Tag names a point of the history of (c's world, run) name: the tick m
// resolves to among the visible ticks of the world's view (its own or
// one it inherits), with message. Everything is checked before the entry
// (a bad name or message, a taken name, a point that names no visible
// tick): a refusal writes nothing. A name another writer takes first is
// refused by the log (TagExistsError). load reads the ancestors' states.
func (c *Catalog) Tag(ctx context.Context, load Loader, run string, m Moment, name, message string) (Tag, error) {
	if err := ValidateRunName(run); err != nil {
		return Tag{}, err
	}
	if err := ValidateTagName(name); err != nil {
		return Tag{}, err
	}
	if len(message) > MaxTagMessage {
		return Tag{}, fmt.Errorf("tag %s: the message is %d bytes, over the %d a tag's message may have", name, len(message), MaxTagMessage)
	}
	if !utf8.ValidString(message) {
		return Tag{}, fmt.Errorf("tag %s: the message is not UTF-8", name)
	}
	s, err := c.Exact(ctx)
	if err != nil {
		return Tag{}, err
	}
	if !s.World.Created {
		return Tag{}, fmt.Errorf("world %s: %w", c.world, ErrNoWorld)
	}
	if old, ok := s.Tag(name); ok {
		return Tag{}, &TagExistsError{World: c.world, Tag: old}
	}
	v, err := OpenView(ctx, func(ctx context.Context, w string) (*State, error) {
		if w == c.world {
			return s, nil
		}
		return load(ctx, w)
	}, c.world, run)
	if err != nil {
		return Tag{}, err
	}
	n, ok, err := m.InView(v, math.MaxInt64)
	if err != nil {
		return Tag{}, fmt.Errorf("world %s run %s: %w", c.world, run, err)
	}
	if !ok {
		return Tag{}, fmt.Errorf("world %s run %s: %s names no tick (none was published by then): %w", c.world, run, m.Text, ErrNotFound)
	}
	t, ok := v.Tick(n)
	if !ok {
		return Tag{}, fmt.Errorf("world %s run %s: tick %d is not visible (a tag names a visible tick): %w", c.world, run, n, ErrNotFound)
	}
	op := TagOp{Name: name, Run: run, Tick: n, CommitToken: t.CommitToken, Message: message, Holder: c.opts.Store, NowMs: time.Now().UnixMilli()}
	r, err := c.Commit(ctx, Entry{Kind: KindTagCreate, Tag: &op})
	if err != nil {
		return Tag{}, fmt.Errorf("world %s: tag %s: %w", c.world, name, err)
	}
	return Tag{Name: name, Run: run, Tick: n, CommitToken: t.CommitToken, Message: message, Holder: op.Holder, CreatedUnixMs: op.NowMs, Seq: r.Seq}, nil
}

// Untag deletes the tag called name (ErrNoTag: the world has none), and
// returns it.
func (c *Catalog) Untag(ctx context.Context, name string) (Tag, error) {
	s, err := c.Exact(ctx)
	if err != nil {
		return Tag{}, err
	}
	old, ok := s.Tag(name)
	if !ok {
		return Tag{}, fmt.Errorf("world %s: tag %s: %w", c.world, name, ErrNoTag)
	}
	op := TagOp{Name: name, Holder: c.opts.Store, NowMs: time.Now().UnixMilli()}
	if _, err := c.Commit(ctx, Entry{Kind: KindTagDelete, Tag: &op}); err != nil {
		if errors.Is(err, ErrNoTag) {
			return Tag{}, fmt.Errorf("world %s: tag %s was deleted by another writer: %w", c.world, name, err)
		}
		return Tag{}, fmt.Errorf("world %s: deleting tag %s: %w", c.world, name, err)
	}
	return old, nil
}
