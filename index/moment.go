package index

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound: a point names no visible tick (package sql's ErrNotFound
// is the same error).
var ErrNotFound = errors.New("not found")

// A Moment is a point of a run's history as a person types it, parsed by
// ParseMoment: the one parser of every point worldfs takes (README, "Time:
// points and ranges"): worldfs sql's --at, --at-time and --until, the
// W@POINT of worldfs diff, worldfs tag, and the web interface's tick box.
// Exactly one of Tick, Back, Token, Time and Tag is set.
type Moment struct {
	// Text is the point as it was typed.
	Text string
	// Tick is a tick number ("170").
	Tick *int64
	// Back is a tick counted from the head: "head" is 0, "head~10" the
	// tick 10 before the head (ticks of a run are numbered one after
	// another).
	Back *int64
	// Token is a commit token: the tick it published.
	Token string
	// Time is an instant: the newest tick published at or before it.
	Time *time.Time
	// Tag is a tag of the world (tag.go): the tick it names. Resolved by
	// InView, which knows the world's tags; In refuses it.
	Tag string
}

// MomentForms says what ParseMoment takes, for help texts and errors.
const MomentForms = "a tick (170), head, head~10 (10 ticks before the head), a commit token, a tag (tag:NAME), or a time: " +
	"2026-12-01T10:00:00Z (RFC 3339), 2026-12-01 10:00 or 10:00 (local time; today), -1m, 2h ago or now"

// TimeForms says what ParseInstant takes.
const TimeForms = "2026-12-01T10:00:00Z (RFC 3339), 2026-12-01 10:00 or 10:00 (local time; today), -1m, 2h ago or now"

// ParseMoment parses a point of a run's history: a tick number, head or
// head~N, a commit token (32 lowercase hex digits), a tag (tag:NAME), or
// an instant as ParseInstant takes it. now is the present, and its
// location the time zone of the forms without one.
func ParseMoment(s string, now time.Time) (Moment, error) {
	text := strings.TrimSpace(s)
	m := Moment{Text: text}
	lower := strings.ToLower(text)
	switch {
	case text == "":
		return m, fmt.Errorf("no point given: give %s", MomentForms)
	case lower == "head":
		m.Back = new(int64)
		return m, nil
	case strings.HasPrefix(lower, "head~"):
		n, err := strconv.ParseInt(lower[len("head~"):], 10, 64)
		if err != nil || n < 0 {
			return m, fmt.Errorf("%q: after head~ comes how many ticks before the head (head~10)", text)
		}
		m.Back = &n
		return m, nil
	case isToken(text):
		m.Token = text
		return m, nil
	case isDigits(text):
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return m, fmt.Errorf("%q: a tick number is at most %d", text, int64(math.MaxInt64))
		}
		m.Tick = &n
		return m, nil
	case len(text) > 1 && text[0] == '-' && isDigits(text[1:]):
		return m, fmt.Errorf("%q: ticks are 0 or more; for ticks before the head write head~%s, for a time before now add a unit (%sm)", text, text[1:], text)
	case strings.HasPrefix(lower, TagPrefix):
		name := text[len(TagPrefix):]
		if err := ValidateTagName(name); err != nil {
			return m, fmt.Errorf("%q: %w", text, err)
		}
		m.Tag = name
		return m, nil
	}
	t, err := ParseInstant(text, now)
	if err != nil {
		return m, fmt.Errorf("%q is not a point: give %s", text, MomentForms)
	}
	m.Time = &t
	return m, nil
}

// localLayouts are the instants typed without a zone, read in now's
// location: a date and a time (the seconds, and their fraction, optional),
// or a date alone (midnight).
var localLayouts = []string{
	"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02",
}

// zonedLayouts are RFC 3339 with a space for the T, and the zone as
// DuckDB prints a TIMESTAMPTZ (2026-12-01 10:00:00.5+00), so that a
// published_at copied from worldfs_ticks reads back.
var zonedLayouts = []string{
	time.RFC3339Nano, "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05Z07", "2006-01-02T15:04:05Z07",
}

// clockLayouts are a time of day: today's, in now's location.
var clockLayouts = []string{"15:04:05", "15:04"}

// ParseInstant parses an instant: RFC 3339 (2026-12-01T10:00:00Z, with
// an offset, a space for the T, or a zone as DuckDB prints it: +00); a
// date and time without a zone (2026-12-01 10:00, 2026-12-01T10:00:30,
// 2026-12-01), or a time of day (10:00, 10:00:30: today's), both in now's
// location; a time before now (-1m, -2h30m, 2h ago, 1 hour ago, 3 days
// ago); or now.
func ParseInstant(s string, now time.Time) (time.Time, error) {
	text := strings.TrimSpace(s)
	loc := now.Location()
	if strings.EqualFold(text, "now") {
		return now, nil
	}
	for _, l := range zonedLayouts {
		if t, err := time.Parse(l, text); err == nil {
			return t, nil
		}
	}
	for _, l := range localLayouts {
		if t, err := time.ParseInLocation(l, text, loc); err == nil {
			return t, nil
		}
	}
	for _, l := range clockLayouts {
		if t, err := time.ParseInLocation(l, text, loc); err == nil {
			y, mo, d := now.In(loc).Date()
			return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc), nil
		}
	}
	if rest, ok := strings.CutPrefix(text, "-"); ok {
		if d, ok := parseSpan(rest); ok {
			return now.Add(-d), nil
		}
	}
	if rest, ok := strings.CutSuffix(strings.ToLower(text), "ago"); ok {
		if d, ok := parseSpan(rest); ok {
			return now.Add(-d), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give %s", text, TimeForms)
}

// spanUnits are the units of a span of time before now.
var spanUnits = map[string]time.Duration{
	"ms": time.Millisecond,
	"s":  time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// parseSpan parses a positive span: numbers each followed by a unit,
// spaces allowed between them (2h30m, 1 hour, 90 minutes, 1.5d).
func parseSpan(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	var total float64
	seen := false
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if i == 0 || err != nil {
			return 0, false
		}
		s = strings.TrimLeft(s[i:], " ")
		j := 0
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
			j++
		}
		unit, ok := spanUnits[strings.ToLower(s[:j])]
		if !ok {
			return 0, false
		}
		total += n * float64(unit)
		s, seen = strings.TrimLeft(s[j:], " ,"), true
	}
	if !seen || total <= 0 || total > float64(math.MaxInt64) {
		return 0, false
	}
	return time.Duration(total), true
}

// ParseMomentOrTag is ParseMoment, taking also a bare NAME that no other
// form reads as the tag NAME: the POINT of W@POINT (worldfs diff
// W@fig3), where a name reads naturally.
func ParseMomentOrTag(s string, now time.Time) (Moment, error) {
	m, err := ParseMoment(s, now)
	if err != nil && tagLike(m.Text) {
		return Moment{Text: m.Text, Tag: m.Text}, nil
	}
	return m, err
}

// tagLike reports whether s is spelled as a tag's name (ValidateTagName
// without the check against the other forms, which ParseMoment has
// made).
func tagLike(s string) bool {
	if s == "" || len(s) > MaxTagNameLen || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isToken reports whether s is spelled as a commit token: 32 lowercase
// hex digits (index.TickToken).
func isToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// TickAt is a visible tick as a Moment is resolved among them: its
// number, when it was published (Unix ms; 0: not recorded) and its commit
// token.
type TickAt struct {
	Tick, PublishedMs int64
	Token             string
}

// In resolves m among a run's visible ticks, which ticks lists in tick
// order: the tick m names, and ok false for an instant before the first
// tick was published (no tick: what the views pinned there show). A tick
// number is returned as it is (whether it is visible is the caller's to
// say); a head form in a run without a tick, head~N before the first
// tick, and a token no visible tick carries are errors wrapping
// ErrNotFound.
func (m Moment) In(ticks iter.Seq[TickAt]) (tick int64, ok bool, err error) {
	switch {
	case m.Tick != nil:
		return *m.Tick, true, nil
	case m.Back != nil:
		first, last, seen := int64(0), int64(0), false
		for t := range ticks {
			if !seen {
				first = t.Tick
			}
			last, seen = t.Tick, true
		}
		if !seen {
			return 0, false, fmt.Errorf("%s: the run has no visible tick yet: %w", m.Text, ErrNotFound)
		}
		if last-*m.Back < first {
			return 0, false, fmt.Errorf("%s is before the first tick: the run's ticks are %d..%d (head~%d is tick %d): %w",
				m.Text, first, last, last-first, first, ErrNotFound)
		}
		return last - *m.Back, true, nil
	case m.Token != "":
		for t := range ticks {
			if t.Token == m.Token {
				return t.Tick, true, nil
			}
		}
		return 0, false, fmt.Errorf("commit token %s names no visible tick of the run: %w", m.Token, ErrNotFound)
	case m.Tag != "":
		return 0, false, fmt.Errorf("%s names a tag: resolve it among the world's tags (Moment.InView)", m.Text)
	case m.Time != nil:
		ms := m.Time.UnixMilli()
		for t := range ticks {
			if t.PublishedMs > 0 && t.PublishedMs <= ms && (!ok || t.Tick > tick) {
				tick, ok = t.Tick, true
			}
		}
		return tick, ok, nil
	}
	return 0, false, errors.New("an empty point")
}

// InView resolves m among the visible ticks of v up to upTo, as In does,
// and a tag among the tags of v's world (TickOfTag).
func (m Moment) InView(v *View, upTo int64) (tick int64, ok bool, err error) {
	if m.Tag != "" {
		t, err := TickOfTag(v, m.Tag, upTo)
		if err != nil {
			return 0, false, m.NotATag(err)
		}
		return t.Tick.Tick, true, nil
	}
	return m.In(ViewTicks(v, upTo))
}

// NotATag is err, the failure to resolve m as a tag, saying also that m
// is no other point when it was typed as a bare name (not tag:NAME): a
// mistyped time reads as a tag the world lacks.
func (m Moment) NotATag(err error) error {
	if m.Tag == "" || strings.HasPrefix(strings.ToLower(m.Text), TagPrefix) || !errors.Is(err, ErrNoTag) {
		return err
	}
	return fmt.Errorf("%q is not a point (give %s), nor a tag: %w", m.Text, MomentForms, err)
}

// ViewTicks lists the visible ticks of v up to upTo, in tick order, as
// Moment.In resolves a point among them.
func ViewTicks(v *View, upTo int64) iter.Seq[TickAt] {
	return func(yield func(TickAt) bool) {
		v.Ticks(math.MinInt64, upTo, func(t TickRef) bool {
			return yield(TickAt{Tick: t.Tick.Tick, PublishedMs: t.PublishedUnixMs, Token: t.CommitToken})
		})
	}
}
