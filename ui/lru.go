package ui

import clist "container/list"

// lru is an order of keys by last use, as the mount orders its catalogs.
type lru[K comparable] struct {
	order *clist.List // of K; front: used last
	// INVARIANT: els holds the elements of order, by key.
	els map[K]*clist.Element
}

func newLRU[K comparable]() *lru[K] {
	return &lru[K]{order: clist.New(), els: map[K]*clist.Element{}}
}

// use puts k first.
func (l *lru[K]) use(k K) {
	if e, ok := l.els[k]; ok {
		l.order.MoveToFront(e)
		return
	}
	l.els[k] = l.order.PushFront(k)
}

func (l *lru[K]) remove(k K) {
	if e, ok := l.els[k]; ok {
		l.order.Remove(e)
		delete(l.els, k)
	}
}

// over returns the keys past the first n, least recently used first,
// and forgets them.
func (l *lru[K]) over(n int) []K {
	var out []K
	for l.order.Len() > n {
		k := l.order.Remove(l.order.Back()).(K)
		delete(l.els, k)
		out = append(out, k)
	}
	return out
}

func (l *lru[K]) len() int { return l.order.Len() }
