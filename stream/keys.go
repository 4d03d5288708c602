package stream

// keyTable serialises events with equal keys (see [WithOrderKey]): take
// reads the event's key, once, and reports whether the event in slot i may
// run now, or queues it behind its key; give releases slot i's key and
// returns the next slot queued on it, or -1.
type keyTable[T any] interface {
	take(ev T, i int32) bool
	give(i int32) int32
	clear()
}

// keys is a keyTable: per key, the slot that holds it and the last queued;
// per slot, its key and the slot queued after it.
type keys[T any, K comparable] struct {
	key   func(T) K
	held  map[K]keyQueue
	of    []K
	after []int32
}

type keyQueue struct{ head, tail int32 }

// newKeys returns a keyTable for a window of the given size.
func newKeys[T any, K comparable](key func(T) K, window int) keyTable[T] {
	return &keys[T, K]{key: key, held: make(map[K]keyQueue), of: make([]K, window), after: make([]int32, window)}
}

func (k *keys[T, K]) take(ev T, i int32) bool {
	id := k.key(ev)
	k.of[i] = id
	k.after[i] = -1
	q, ok := k.held[id]
	if !ok {
		k.held[id] = keyQueue{head: i, tail: i}
		return true
	}
	k.after[q.tail] = i
	q.tail = i
	k.held[id] = q
	return false
}

func (k *keys[T, K]) give(i int32) int32 {
	id := k.of[i]
	q := k.held[id]
	if q.tail == i {
		delete(k.held, id)
		return -1
	}
	q.head = k.after[i]
	k.held[id] = q
	return q.head
}

func (k *keys[T, K]) clear() {
	clear(k.held)
	clear(k.of)
}
