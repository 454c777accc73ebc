// Package testrec records what a hook saw, for tests: the events of an
// actors.LeaseSupervisor, the reports of a leasehold.Watchdog.
package testrec

import (
	"sync"
	"time"
)

// Recorder keeps the values a hook saw, with the (virtual, under synctest)
// time each was seen. The zero value is ready; it is safe for concurrent use.
type Recorder[E any] struct {
	mu  sync.Mutex
	evs []E
	at  []time.Time
}

// Hook records ev. It has the shape of an OnEvent callback.
func (r *Recorder[E]) Hook(ev E) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	r.at = append(r.at, time.Now())
}

// All returns the recorded values of dynamic type T, in order, and when
// each was seen.
func All[T, E any](r *Recorder[E]) ([]T, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	var at []time.Time
	for i, ev := range r.evs {
		if e, ok := any(ev).(T); ok {
			out = append(out, e)
			at = append(at, r.at[i])
		}
	}
	return out, at
}

// Count returns how many recorded values are of dynamic type T.
func Count[T, E any](r *Recorder[E]) int {
	evs, _ := All[T](r)
	return len(evs)
}
