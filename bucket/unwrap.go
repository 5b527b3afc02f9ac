package bucket

// Wrapper is a bucket built on another one (a cache, a fault injector, a
// counter): Unwrap returns the bucket it passes calls to. Every wrapper
// implements it, so that a capability of the bucket underneath (Local)
// stays visible through any stack of wrappers.
type Wrapper interface {
	Bucket
	Unwrap() Bucket
}

// As returns the first bucket of type T in b's stack: b itself, then what
// each Wrapper wraps. T is usually a capability interface such as Local.
func As[T any](b Bucket) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}

// Local is the capability of a bucket whose objects are files on this
// machine (bucket/local): readers open them in place rather than copy them
// through a cache. Find it with As[Local], never by the concrete type, so
// that a wrapped local bucket is still read in place.
type Local interface {
	Bucket
	// Root is the directory the bucket lives in.
	Root() string
	// Path returns the file that holds object name.
	Path(name string) (string, error)
}

// Made is the capability of a bucket that exists only once it is made
// (bucket/local: its directory): a command that only reads asks Exists
// rather than make one by opening it, and `worldfs init` calls Make. Find
// it with As[Made], never by the concrete type.
type Made interface {
	Local
	// Exists reports whether the bucket has been made.
	Exists() (bool, error)
	// Make makes the bucket if it does not exist yet.
	Make() error
}

// Addressable is the capability of a bucket other programs address by a
// URI (bucket/local: file:///dir/, bucket/gcs: gs://bucket/prefix/): an
// export names the files it lists by it. Find it with As[Addressable],
// never by the concrete type.
type Addressable interface {
	Bucket
	// URI is the bucket's root as other programs address it, ending in
	// a slash; an object's URI is URI() + its name.
	URI() string
}
