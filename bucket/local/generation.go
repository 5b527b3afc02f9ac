package local

import "io/fs"

// Generation is the generation of the object whose file info is info: its
// modification time in nanoseconds, set at create (see writeTemp). Readers
// that open a bucket file in place compare it with the generation the
// catalog recorded.
func Generation(info fs.FileInfo) int64 { return info.ModTime().UnixNano() }
