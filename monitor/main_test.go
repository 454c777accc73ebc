package monitor_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines, letting through protoactor-go's
// dead-letter throttle (as the actors package's tests do): a message to a
// stopped actor starts it, and it ends by itself one second later. The
// real-time example stops actors while messages are in flight.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
