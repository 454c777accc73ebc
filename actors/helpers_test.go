package actors

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/testrec"
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
type recorder = testrec.Recorder[Event]

// all returns the events of type T, and when each was seen.
func all[T Event](r *recorder) ([]T, []time.Time) { return testrec.All[T](r) }

func count[T Event](r *recorder) int { return testrec.Count[T](r) }
