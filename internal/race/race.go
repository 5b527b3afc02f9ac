//go:build race

package race

// Enabled: built with -race.
const Enabled = true
