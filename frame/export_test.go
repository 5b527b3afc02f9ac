package frame

import (
	"crypto/sha256"
	"encoding/binary"
)

// BlockRows is the rows of a block a CompactedFile decodes at a time.
const BlockRows = blockRows

// EncodeV1 is x in the first format of tick indexes (no CSV sizes), as a
// build before them wrote it, with that build's encoder fingerprint.
func EncodeV1(x *TickIndex) ([]byte, error) {
	id, err := encodingID(1)
	if err != nil {
		return nil, err
	}
	v1 := *x
	v1.Encoding = id
	out := append([]byte(nil), tickIndexMagics[1]...)
	out = append(out, v1.File[:]...)
	out = append(out, v1.Encoding[:]...)
	out = binary.AppendUvarint(out, uint64(v1.Rows))
	out = binary.AppendUvarint(out, uint64(len(v1.Ticks)))
	prev := int64(0)
	for _, e := range v1.Ticks {
		out = binary.AppendUvarint(out, uint64(e.Tick-prev))
		out = binary.AppendUvarint(out, uint64(e.Rows))
		out = binary.AppendUvarint(out, uint64(e.Size))
		out = append(out, e.Digest[:]...)
		prev = e.Tick
	}
	sum := sha256.Sum256(out)
	return append(out, sum[:]...), nil
}

// StatsLength is the length of x's summaries' stats.
func StatsLength(x *TickIndex) uint64 { return uint64(len(statsBlock(x.Summaries))) }

// EncodeClaimingStats is x encoded with its summaries' stats claiming to
// be n bytes long (what a damaged or crafted index might claim), the
// frame holding them as they are, its checksum made good.
func EncodeClaimingStats(x *TickIndex, n uint64) []byte {
	v := *x
	v.Summaries = nil
	base := v.Encode()
	out := append([]byte(tickIndexMagic), base[len(tickIndexMagic):len(base)-sha256.Size-1]...) // the entries
	out = binary.AppendUvarint(out, uint64(len(x.Summaries)))
	for _, s := range x.Summaries {
		out = binary.AppendUvarint(out, uint64(len(s.Name)))
		out = append(out, s.Name...)
		out = binary.AppendUvarint(out, uint64(len(s.Type)))
		out = append(out, s.Type...)
	}
	z := summaryZstd.enc.EncodeAll(statsBlock(x.Summaries), nil)
	out = binary.AppendUvarint(out, n)
	out = binary.AppendUvarint(out, uint64(len(z)))
	out = append(out, z...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// SweepRows is the rows of a block a swept CompactedFile decodes at a time.
const SweepRows = sweepRows
