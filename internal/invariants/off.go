//go:build !invariants && !race

package invariants

// Enabled: this build checks invariants (tag invariants, or -race).
const Enabled = false
