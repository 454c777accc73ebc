package actors

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. One goroutine of protoactor-go is
// let through: its dead-letter throttle, which a message to a stopped actor
// starts and which ends by itself one second later (throttler.go). A
// real-time test that stops actors while messages are in flight can leave
// one running for that second when the run is slow.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// recorder keeps the events a hook saw, with the virtual time of each.
type recorder struct {
	mu  sync.Mutex
	evs []Event
	at  []time.Time
}

func (r *recorder) hook(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	r.at = append(r.at, time.Now())
}

// all returns the events of type T, and when each was seen.
func all[T Event](r *recorder) ([]T, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	var at []time.Time
	for i, ev := range r.evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
			at = append(at, r.at[i])
		}
	}
	return out, at
}

func count[T Event](r *recorder) int {
	evs, _ := all[T](r)
	return len(evs)
}
