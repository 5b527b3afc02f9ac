// Package invariants says whether a build checks the assertions a library
// makes about its own state (pebble's internal/invariants): a caller's
// mistake is a type or an error, never a panic; what only a bug of the
// library itself could break is asserted, and the assertion panics only
// in builds that check (tag invariants, or the race detector's), costing
// release builds nothing.
package invariants
