// Package race reports whether the race detector is built in (go test
// -race), as the standard library's internal/race does: a test whose
// value under the detector is the concurrency it exercises, not its
// volume, runs smaller there (fewer ticks, rounds or rows, never none),
// so that make test's race run fits its budget.
package race
