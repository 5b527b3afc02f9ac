// Package bucket is the object-store contract everything durable in worldfs
// stands on, and the helpers every layer above uses with it.
//
// A bucket holds immutable objects under slash-separated names. Create is
// create-if-absent and is the only commit primitive: no object is ever
// overwritten. Reads are strongly consistent (read-after-write and
// not-found). Delete is conditioned on the generation the caller read and
// exists for maintenance only.
//
// Backends live in sub-packages beside this contract: local (a directory,
// the default), gcs (Google Cloud Storage) and mem (memory, with a seeded
// GCS-shaped latency model). faulty wraps any backend with injected faults,
// buckettest is the conformance suite every backend runs, and bucketurl is
// the one wiring point that builds a backend from a URL.
//
// A mutation whose outcome is unknown (a timeout, a lost response, a 429 or
// 5xx) fails with ErrAmbiguous. Callers resolve it by reading the name back;
// CreateOnce does exactly that and is the helper every committing caller uses.
//
// Every call has a deadline: a backend gives up on a store that sends
// nothing for its timeout (DefaultTimeout unless configured) and fails the
// call with *NotAnsweringError, which matches ErrAmbiguous for a create or
// delete and ErrUnavailable otherwise. So a stalled store costs a bounded
// wait, and the unknown-outcome handling above takes over.
package bucket
