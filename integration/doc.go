// Package integration tests the worldfs mount through real FUSE mounts:
// each test mounts a bucket with testMount (unmounted when the test ends)
// and uses it as a user would, with system calls, DuckDB reading files
// through the mount, and other processes. Without FUSE a test fails under
// CI=true and is skipped, saying why, elsewhere (internal/realpart). The
// package holds tests only.
package integration
