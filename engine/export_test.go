package engine

// WriteFragmentsWithoutCSVSizes makes EncodeFragment write fragments as
// writers did before CSV sizes were recorded in their footers, until the
// returned function is called.
func WriteFragmentsWithoutCSVSizes() (restore func()) {
	withoutCSVSizes.Store(true)
	return func() { withoutCSVSizes.Store(false) }
}
