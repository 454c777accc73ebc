package lock

import "sync"

// queues holds a Locker's waiting Acquire calls, by resource.
type queues struct {
	mu sync.Mutex
	m  map[string]*queue
}

// queue holds the Acquire calls of one Locker waiting for one resource,
// first come first served: only the first contends at the store.
type queue struct {
	waiters []*waiter
	holder  *Guard // the guard the last waiter that left with the lock got
}

// waiter is one Acquire call in a queue.
type waiter struct {
	turn chan struct{} // closed when the waiter is first
	poke chan struct{} // a guard of this Locker released the resource (buffered)
}

// enqueue adds a waiter for resource, first if nobody waits.
func (qs *queues) enqueue(resource string) (*waiter, *queue) {
	w := &waiter{turn: make(chan struct{}), poke: make(chan struct{}, 1)}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.m[resource]
	if q == nil {
		q = &queue{}
		qs.m[resource] = q
	}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	return w, q
}

// queued reports whether Acquire calls of this Locker wait for resource.
func (qs *queues) queued(resource string) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.m[resource] != nil
}

// dequeue removes w from the queue of resource, with the guard it got (if
// any), and hands the turn to the next waiter.
func (qs *queues) dequeue(resource string, w *waiter, got *Guard) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.m[resource]
	if q == nil {
		return
	}
	if got != nil {
		q.holder = got
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	if len(q.waiters) == 0 {
		delete(qs.m, resource)
	}
}

// poke tells the first waiter for g's resource, if any, that g, a guard of
// this Locker, has just released it, so that it tries at once. A waiter
// that took the lock since (woken by its watch before the poke) has handed
// the turn on: the next waiter waits for that waiter's guard, not for g,
// and a poke of g would only cost it a store call that finds the lock
// held. A guard that did not come from the queue (a TryAcquire) pokes while
// the queue's last guard has ended.
func (qs *queues) poke(g *Guard) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.m[g.resource]; q != nil && len(q.waiters) > 0 &&
		(q.holder == nil || q.holder == g || q.holder.Err() != nil) {
		select {
		case q.waiters[0].poke <- struct{}{}:
		default:
		}
	}
}

// localHolder returns the guard of this Locker that holds the resource of
// q, if the last waiter of q left with one that has not ended.
func (qs *queues) localHolder(q *queue) *Guard {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q.holder != nil && q.holder.Err() == nil {
		return q.holder
	}
	return nil
}
