package engine

// WriteFragmentsWithoutCSVSizes makes EncodeFragment write fragments as
// writers did before CSV sizes were recorded in their footers, until the
// returned function is called.
func WriteFragmentsWithoutCSVSizes() (restore func()) {
	withoutCSVSizes.Store(true)
	return func() { withoutCSVSizes.Store(false) }
}

// BlockRows is the rows of a block a CompactedFile decodes at a time.
const BlockRows = blockRows
