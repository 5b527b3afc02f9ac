package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"unicode/utf8"
)

// A fast reader of slot JSON. A loser of a slot race decodes every
// winner's slot before it can try again, and encoding/json spends most of
// that time in reflection and in a second pass over the input; this reader
// takes the slot's fields directly. It is a shortcut, never an authority:
// anything it does not recognise exactly (an unknown or repeated field, a
// number that is not a plain integer, a string with escapes or invalid
// UTF-8, whitespace where canonical JSON has none is fine, but any other
// surprise) makes it give up, and DecodeSlot then decodes the same bytes
// with encoding/json, whose answer (a slot, or ErrCorrupt) stands. So what
// it accepts it decodes exactly as encoding/json would, and a test holds
// the two to that on generated and mutated slots.

// errNotFast: the fast reader gave up; encoding/json decides.
var errNotFast = errors.New("not fast-path slot JSON")

// jsonReader reads JSON from b at i; the first surprise sets err, after
// which every method does nothing.
type jsonReader struct {
	b   []byte
	i   int
	err error
	// names holds the repeating strings read so far (see name).
	names map[string]string
}

func (r *jsonReader) fail() { r.err = errNotFast }

// next skips whitespace and returns the next byte (0 at the end).
func (r *jsonReader) next() byte {
	for r.i < len(r.b) {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

// enter opens an object ('{') or an array ('['), and reports whether a
// member follows. The loop over an object or array is
//
//	for ok := r.enter('{'); ok; ok = r.more('{') { … }
func (r *jsonReader) enter(open byte) bool {
	if r.err != nil {
		return false
	}
	if r.next() != open {
		r.fail()
		return false
	}
	r.i++
	if r.next() == open+2 { // '}' or ']'
		r.i++
		return false
	}
	return true
}

// more consumes the separator after a member and reports whether another
// follows.
func (r *jsonReader) more(open byte) bool {
	if r.err != nil {
		return false
	}
	switch r.next() {
	case ',':
		r.i++
		return true
	case open + 2:
		r.i++
		return false
	}
	r.fail()
	return false
}

// key reads an object key and its colon; the caller switches on
// string(key), which does not copy it. Each key may appear once in an
// object: once marks key k of the object's seen set.
func (r *jsonReader) key() []byte {
	k := r.rawBytes()
	if r.err == nil && r.next() != ':' {
		r.fail()
	}
	r.i++
	return k
}

func (r *jsonReader) once(seen *uint64, k int) {
	if *seen&(1<<k) != 0 {
		r.fail() // a repeated key: encoding/json merges, so it decides
	}
	*seen |= 1 << k
}

// null consumes a null if one is next. A null leaves a field at its zero
// value, as encoding/json leaves a field it has not set (no key repeats).
func (r *jsonReader) null() bool {
	if r.err == nil && r.next() == 'n' && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// rawString reads a string without escapes, control characters or
// invalid UTF-8 (anything else gives up).
func (r *jsonReader) rawString() string {
	if b := r.rawBytes(); b != nil {
		return string(b)
	}
	return ""
}

// rawBytes is rawString, sharing the input's bytes.
func (r *jsonReader) rawBytes() []byte {
	if r.err != nil {
		return nil
	}
	if r.next() != '"' {
		r.fail()
		return nil
	}
	r.i++
	start, ascii := r.i, true
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !ascii && !utf8.Valid(s) {
				r.fail()
				return nil
			}
			return s
		case c == '\\' || c < 0x20:
			r.fail()
			return nil
		case c >= 0x80:
			ascii = false
		}
	}
	r.fail()
	return nil
}

func (r *jsonReader) str(v *string) {
	if !r.null() {
		*v = r.rawString()
	}
}

// name reads a string that repeats across a slot's entries (a kind, a
// run, a table), storing each distinct one once.
func (r *jsonReader) name(v *string) {
	if r.null() {
		return
	}
	b := r.rawBytes()
	if n, ok := r.names[string(b)]; ok {
		*v = n
		return
	}
	if r.names == nil {
		r.names = map[string]string{}
	}
	*v = string(b)
	r.names[*v] = *v
}

// integer reads an integer by JSON's grammar for one (no fraction, no
// exponent, no leading zero) and returns its magnitude and sign: at most
// max, or max+1 if negative (only if signed).
func (r *jsonReader) integer(signed bool, max uint64) (mag uint64, negative bool) {
	if r.null() || r.err != nil {
		return 0, false
	}
	r.next()
	limit := max
	if signed && r.i < len(r.b) && r.b[r.i] == '-' {
		negative, limit = true, max+1
		r.i++
	}
	digits := r.i
	for ; r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9'; r.i++ {
		d := uint64(r.b[r.i] - '0')
		if mag > (limit-d)/10 { // mag*10+d would pass limit
			r.fail()
			return 0, false
		}
		mag = mag*10 + d
	}
	if r.i == digits || r.b[digits] == '0' && r.i-digits > 1 ||
		r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.fail()
		return 0, false
	}
	return mag, negative
}

func (r *jsonReader) int64(v *int64) {
	switch mag, neg := r.integer(true, math.MaxInt64); {
	case neg && mag > 0:
		*v = -int64(mag-1) - 1
	case !neg:
		*v = int64(mag)
	}
}

func (r *jsonReader) int(v *int) {
	var n int64
	r.int64(&n)
	if n != int64(int(n)) {
		r.fail()
	}
	*v = int(n)
}

func (r *jsonReader) uint64(v *uint64) {
	if mag, _ := r.integer(false, math.MaxUint64); mag != 0 {
		*v = mag
	}
}

func (r *jsonReader) bool(v *bool) {
	if r.null() || r.err != nil {
		return
	}
	r.next()
	switch {
	case len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "true":
		*v, r.i = true, r.i+4
	case len(r.b)-r.i >= 5 && string(r.b[r.i:r.i+5]) == "false":
		*v, r.i = false, r.i+5
	default:
		r.fail()
	}
}

func (r *jsonReader) strings(v *[]string) {
	if r.null() {
		return
	}
	out := []string{}
	for ok := r.enter('['); ok; ok = r.more('[') {
		var s string
		r.str(&s)
		out = append(out, s)
	}
	*v = out
}

// decodeSlotFast decodes canonical, or gives up with errNotFast.
func decodeSlotFast(canonical []byte) (*Slot, error) {
	r := &jsonReader{b: canonical}
	var s Slot
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "format":
			r.once(&seen, 0)
			r.int(&s.Format)
		case "world":
			r.once(&seen, 1)
			r.str(&s.World)
		case "first_seq":
			r.once(&seen, 2)
			r.uint64(&s.FirstSeq)
		case "prev":
			r.once(&seen, 3)
			r.str(&s.Prev)
		case "store":
			r.once(&seen, 4)
			r.str(&s.Store)
		case "entries":
			r.once(&seen, 5)
			if r.null() {
				break
			}
			s.Entries = []Entry{}
			for ok := r.enter('['); ok; ok = r.more('[') {
				s.Entries = append(s.Entries, Entry{})
				r.entry(&s.Entries[len(s.Entries)-1])
			}
		default:
			r.fail()
		}
	}
	if r.err == nil && (r.next() != 0 || r.i != len(r.b)) {
		r.fail()
	}
	if r.err != nil {
		return nil, r.err
	}
	return &s, nil
}

func (r *jsonReader) entry(e *Entry) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "op":
			r.once(&seen, 0)
			r.str(&e.Op)
		case "kind":
			r.once(&seen, 1)
			var k string
			r.name(&k)
			e.Kind = Kind(k)
		case "world_create":
			r.once(&seen, 2)
			if !r.null() {
				e.WorldCreate = new(WorldCreate)
				r.worldCreate(e.WorldCreate)
			}
		case "fence_acquire":
			r.once(&seen, 3)
			if !r.null() {
				e.FenceAcquire = new(FenceAcquire)
				r.fenceAcquire(e.FenceAcquire)
			}
		case "tick_publish":
			r.once(&seen, 4)
			if !r.null() {
				e.TickPublish = new(TickPublish)
				r.tickPublish(e.TickPublish)
			}
		case "world_status":
			r.once(&seen, 5)
			if !r.null() {
				e.WorldStatus = new(WorldStatus)
				r.worldStatus(e.WorldStatus)
			}
		case "claim":
			r.once(&seen, 6)
			if !r.null() {
				e.Claim = new(ClaimOp)
				r.claimOp(e.Claim)
			}
		case "rewrite":
			r.once(&seen, 7)
			if !r.null() {
				e.Rewrite = new(FragmentsRewrite)
				r.rewrite(e.Rewrite)
			}
		case "command":
			r.once(&seen, 8)
			if !r.null() {
				e.Command = new(Command)
				r.command(e.Command)
			}
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) worldCreate(c *WorldCreate) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "parent":
			r.once(&seen, 0)
			r.str(&c.Parent)
		case "fork_run":
			r.once(&seen, 1)
			r.str(&c.ForkRun)
		case "fork_tick":
			r.once(&seen, 2)
			r.int64(&c.ForkTick)
		case "writer_mode":
			r.once(&seen, 3)
			r.str(&c.WriterMode)
		case "created_unix_ms":
			r.once(&seen, 4)
			r.int64(&c.CreatedUnixMs)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) fenceAcquire(f *FenceAcquire) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "holder":
			r.once(&seen, 0)
			r.str(&f.Holder)
		case "resume":
			r.once(&seen, 1)
			r.bool(&f.Resume)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) tickPublish(p *TickPublish) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "run":
			r.once(&seen, 0)
			r.name(&p.Run)
		case "tick":
			r.once(&seen, 1)
			r.int64(&p.Tick)
		case "commit_token":
			r.once(&seen, 2)
			r.str(&p.CommitToken)
		case "writer_epoch":
			r.once(&seen, 3)
			r.int64(&p.WriterEpoch)
		case "tables":
			r.once(&seen, 4)
			r.tables(&p.Tables)
		case "next_entity":
			r.once(&seen, 5)
			r.int64(&p.NextEntity)
		case "published_unix_ms":
			r.once(&seen, 6)
			r.int64(&p.PublishedUnixMs)
		case "settle":
			r.once(&seen, 7)
			r.strings(&p.Settle)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) tables(v *[]TableFragments) {
	if r.null() {
		return
	}
	out := []TableFragments{}
	for ok := r.enter('['); ok; ok = r.more('[') {
		var t TableFragments
		var seen uint64
		for ok := r.enter('{'); ok; ok = r.more('{') {
			switch string(r.key()) {
			case "table":
				r.once(&seen, 0)
				r.name(&t.Table)
			case "fragments":
				r.once(&seen, 1)
				r.fragments(&t.Fragments)
			default:
				r.fail()
			}
		}
		out = append(out, t)
	}
	*v = out
}

func (r *jsonReader) fragments(v *[]Fragment) {
	if r.null() {
		return
	}
	out := []Fragment{}
	for ok := r.enter('['); ok; ok = r.more('[') {
		var f Fragment
		var seen uint64
		for ok := r.enter('{'); ok; ok = r.more('{') {
			switch string(r.key()) {
			case "path":
				r.once(&seen, 0)
				r.str(&f.Path)
			case "rows":
				r.once(&seen, 1)
				r.int64(&f.Rows)
			case "bytes":
				r.once(&seen, 2)
				r.int64(&f.Bytes)
			case "digest":
				r.once(&seen, 3)
				r.str(&f.Digest)
			case "generation":
				r.once(&seen, 4)
				r.int64(&f.Generation)
			case "span":
				r.once(&seen, 5)
				r.span(&f.Span)
			default:
				r.fail()
			}
		}
		out = append(out, f)
	}
	*v = out
}

func (r *jsonReader) span(v **Span) {
	if r.null() {
		return
	}
	s := new(Span)
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "from":
			r.once(&seen, 0)
			r.int64(&s.From)
		case "to":
			r.once(&seen, 1)
			r.int64(&s.To)
		default:
			r.fail()
		}
	}
	*v = s
}

func (r *jsonReader) worldStatus(s *WorldStatus) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "status":
			r.once(&seen, 0)
			r.str(&s.Status)
		case "writer_mode":
			r.once(&seen, 1)
			r.str(&s.WriterMode)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) claimOp(c *ClaimOp) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "key":
			r.once(&seen, 0)
			var seenKey uint64
			for ok := r.enter('{'); ok; ok = r.more('{') {
				switch string(r.key()) {
				case "run":
					r.once(&seenKey, 0)
					r.name(&c.Key.Run)
				case "producer":
					r.once(&seenKey, 1)
					r.name(&c.Key.Producer)
				case "external_id":
					r.once(&seenKey, 2)
					r.str(&c.Key.ExternalID)
				default:
					r.fail()
				}
			}
		case "digest":
			r.once(&seen, 1)
			r.str(&c.Digest)
		case "commit_token":
			r.once(&seen, 2)
			r.str(&c.CommitToken)
		case "holder":
			r.once(&seen, 3)
			r.str(&c.Holder)
		case "lease_until_ms":
			r.once(&seen, 4)
			r.int64(&c.LeaseUntilMs)
		case "fragments":
			r.once(&seen, 5)
			r.tables(&c.Fragments)
		case "now_ms":
			r.once(&seen, 6)
			r.int64(&c.NowMs)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) rewrite(w *FragmentsRewrite) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "run":
			r.once(&seen, 0)
			r.name(&w.Run)
		case "tick":
			r.once(&seen, 1)
			r.int64(&w.Tick)
		case "table":
			r.once(&seen, 2)
			r.name(&w.Table)
		case "old":
			r.once(&seen, 3)
			r.strings(&w.Old)
		case "new":
			r.once(&seen, 4)
			r.fragments(&w.New)
		case "span":
			r.once(&seen, 5)
			r.span(&w.Span)
		case "read_seq":
			r.once(&seen, 6)
			r.uint64(&w.ReadSeq)
		case "tables":
			r.once(&seen, 7)
			r.tables(&w.Tables)
		case "facts":
			r.once(&seen, 8)
			r.bool(&w.Facts)
		case "claim_shard":
			r.once(&seen, 9)
			r.int64(&w.ClaimShard)
		case "intent":
			r.once(&seen, 10)
			r.str(&w.Intent)
		default:
			r.fail()
		}
	}
}

func (r *jsonReader) command(c *Command) {
	var seen uint64
	for ok := r.enter('{'); ok; ok = r.more('{') {
		switch string(r.key()) {
		case "id":
			r.once(&seen, 0)
			r.str(&c.ID)
		case "run":
			r.once(&seen, 1)
			r.name(&c.Run)
		case "due":
			r.once(&seen, 2)
			r.int64(&c.Due)
		case "kind":
			r.once(&seen, 3)
			r.name(&c.Kind)
		case "body":
			r.once(&seen, 4)
			r.str(&c.Body)
		default:
			r.fail()
		}
	}
}

// decodeSlotJSON decodes a slot's canonical JSON: by the fast reader, or,
// if it gives up, by encoding/json with unknown fields refused and nothing
// after the slot.
func decodeSlotJSON(canonical []byte) (*Slot, error) {
	if s, err := decodeSlotFast(canonical); err == nil {
		return s, nil
	}
	return decodeSlotStd(canonical)
}

func decodeSlotStd(canonical []byte) (*Slot, error) {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	var s Slot
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return &s, nil
}
