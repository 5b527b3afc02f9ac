package iceberg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/worldfs/worldfs/frame"
)

// filterParquet copies the rows of a fragment whose (tick, commit_token,
// writer_epoch) keep accepts into a new Parquet file of the same schema,
// in order. It returns the copy, the rows kept and read, and the least
// and greatest tick kept.
func filterParquet(data []byte, keep func(tick int64, token string, epoch int64) bool) (out []byte, kept, total, lo, hi int64, err error) {
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, 0, 0, 0, 0, err
	}
	tickCol, tokenCol, epochCol := -1, -1, -1
	for i, path := range file.Schema().Columns() {
		switch path[len(path)-1] {
		case frame.ColTick:
			tickCol = i
		case frame.ColCommitToken:
			tokenCol = i
		case frame.ColWriterEpoch:
			epochCol = i
		}
	}
	if tickCol < 0 || tokenCol < 0 || epochCol < 0 {
		return nil, 0, 0, 0, 0, errors.New("the fragment has no commit columns (tick, commit_token, writer_epoch)")
	}
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, file.Schema(), parquet.Compression(&zstd.Codec{}))
	lo, hi = math.MaxInt64, math.MinInt64
	rows := make([]parquet.Row, 256)
	for _, rg := range file.RowGroups() {
		rr := rg.Rows()
		for {
			n, rerr := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				total++
				var tick, epoch int64
				var token string
				for _, v := range row {
					switch v.Column() {
					case tickCol:
						tick = v.Int64()
					case tokenCol:
						token = string(v.ByteArray())
					case epochCol:
						epoch = v.Int64()
					}
				}
				if !keep(tick, token, epoch) {
					continue
				}
				if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
					rr.Close()
					return nil, 0, 0, 0, 0, err
				}
				kept++
				lo, hi = min(lo, tick), max(hi, tick)
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				rr.Close()
				return nil, 0, 0, 0, 0, fmt.Errorf("reading rows: %w", rerr)
			}
		}
		rr.Close()
	}
	if err := w.Close(); err != nil {
		return nil, 0, 0, 0, 0, err
	}
	return buf.Bytes(), kept, total, lo, hi, nil
}
