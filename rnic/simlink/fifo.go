package simlink

// fifo is a first-in first-out queue on a ring buffer that grows as needed
// and never shrinks, so a queue in steady state does not allocate.
type fifo[T any] struct {
	ring []T
	head int // index of the oldest element
	n    int // number of elements
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if q.n == len(q.ring) {
		grown := make([]T, max(16, 2*len(q.ring)))
		for i := range q.n {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = v
	q.n++
}

// peek returns the oldest element; the queue must not be empty.
func (q *fifo[T]) peek() T { return q.ring[q.head] }

// pop removes and returns the oldest element; the queue must not be empty.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.ring[q.head]
	q.ring[q.head] = zero
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return v
}
