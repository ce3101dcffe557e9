//go:build cgo

package main

import "sync"

// handles maps the 32-bit handles the shim stores in libibverbs objects
// (ibv_pd.handle, ibv_qp.handle, ...) to the Go objects behind them. Handle
// 0 is never given out, so a zeroed C structure names nothing. It is safe
// for concurrent use; lookups take a read lock only.
type handles[T any] struct {
	mu    sync.RWMutex
	slots []T
	used  []bool
	free  []uint32
}

// add stores v and returns its handle.
func (h *handles[T]) add(v T) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.slots) == 0 {
		var zero T
		h.slots, h.used = append(h.slots, zero), append(h.used, false)
	}
	if n := len(h.free); n > 0 {
		i := h.free[n-1]
		h.free = h.free[:n-1]
		h.slots[i], h.used[i] = v, true
		return i
	}
	h.slots, h.used = append(h.slots, v), append(h.used, true)
	return uint32(len(h.slots) - 1)
}

// get returns the object of handle i.
func (h *handles[T]) get(i uint32) (T, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if int(i) >= len(h.slots) || !h.used[i] {
		var zero T
		return zero, false
	}
	return h.slots[i], true
}

// remove forgets handle i and returns what it named.
func (h *handles[T]) remove(i uint32) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var zero T
	if int(i) >= len(h.slots) || !h.used[i] {
		return zero, false
	}
	v := h.slots[i]
	h.slots[i], h.used[i] = zero, false
	h.free = append(h.free, i)
	return v, true
}

// each calls f for every object, under the read lock: f must not add or
// remove.
func (h *handles[T]) each(f func(T)) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for i, used := range h.used {
		if used {
			f(h.slots[i])
		}
	}
}
