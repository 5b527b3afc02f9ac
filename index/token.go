package index

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// BatchOf names the batch a claim's token belongs to: the part before its
// last ".", or the token itself (a claim alone, as every claim before
// batching was). A batch's fragments are named by the batch
// (FragmentPath), each of its claims by a token of its own.
func BatchOf(token string) string {
	if i := strings.LastIndexByte(token, '.'); i > 0 {
		return token[:i]
	}
	return token
}

// A tick's commit token names its tick (TickToken): 32 hex digits, eight
// random bytes, then a mark byte and the tick in seven. A reader that
// looks such a token up decodes the one checkpoint part that holds the
// tick it names (TokenTick, Want.Token), not a whole history. The name
// is a hint, never trusted: the tick found there must carry the token,
// or the lookup reads every tick (State.TickByToken). Tokens that name
// no tick (claims', and ticks' minted before tokens named them, or by a
// writer of its own) are looked up in every tick; one minted otherwise
// that names a tick by chance costs a probe of that tick.
const (
	tickTokenMark = 0x01
	tickTokenMax  = 1<<56 - 1
)

// TickToken returns a fresh commit token for an attempt at tick: random
// (its random bytes), naming tick when 0 ≤ tick < 2⁵⁶.
func TickToken(tick int64, random [16]byte) string {
	b := random
	if 0 <= tick && tick <= tickTokenMax {
		binary.BigEndian.PutUint64(b[8:], uint64(tick))
		b[8] = tickTokenMark
	} else {
		b[8] = 0 // names no tick
	}
	return hex.EncodeToString(b[:])
}

// TokenTick returns the tick token names, if it names one (see
// TickToken). A token minted otherwise may name a tick by chance: what a
// lookup finds there is compared with the token.
func TokenTick(token string) (int64, bool) {
	var b [16]byte
	if len(token) != 2*len(b) || strings.ToLower(token) != token {
		return 0, false
	}
	if _, err := hex.Decode(b[:], []byte(token)); err != nil || b[8] != tickTokenMark {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[8:]) & tickTokenMax), true
}
