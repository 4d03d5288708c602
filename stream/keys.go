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

// keys is a keyTable: per key held, the slot that holds it (the head of
// its queue); per slot, its key, the slot queued after it and, for a
// head, the last slot queued on its key. A free key costs a lookup and an
// insert to take, a delete to give; a queued one, a lookup and an update.
type keys[T any, K comparable] struct {
	key   func(T) K
	held  map[K]int32
	of    []K
	after []int32
	last  []int32
}

// newKeys returns a keyTable for a window of the given size.
func newKeys[T any, K comparable](key func(T) K, window int) keyTable[T] {
	return &keys[T, K]{key: key, held: make(map[K]int32, window), of: make([]K, window),
		after: make([]int32, window), last: make([]int32, window)}
}

func (k *keys[T, K]) take(ev T, i int32) bool {
	id := k.key(ev)
	k.of[i] = id
	k.after[i] = -1
	h, ok := k.held[id]
	if !ok {
		k.held[id] = i
		k.last[i] = i
		return true
	}
	k.after[k.last[h]] = i
	k.last[h] = i
	return false
}

func (k *keys[T, K]) give(i int32) int32 {
	next := k.after[i]
	if next < 0 {
		delete(k.held, k.of[i])
		return -1
	}
	k.last[next] = k.last[i]
	k.held[k.of[i]] = next
	return next
}

func (k *keys[T, K]) clear() {
	clear(k.held)
	clear(k.of)
}
