package sql

import "sync"

// lazy is a value made on its first use and kept once made. A failure is
// not kept: the views' lists of ticks and compacted files are made long
// after their build, and a failure then (a bucket call, a catalog that
// moved on) must not fail every later query of the same views.
type lazy[T any] struct {
	mu   sync.Mutex
	done bool
	v    T
}

// get returns the value, making it with make if it is not made yet. Uses
// wait for each other; make runs once at a time.
func (l *lazy[T]) get(make func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return l.v, nil
	}
	v, err := make()
	if err != nil {
		return v, err
	}
	l.v, l.done = v, true
	return v, nil
}
