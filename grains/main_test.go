package grains_test

import (
	"log/slog"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines; protoactor-go's dead-letter
// throttle and the gossip's throttles outlive a cluster by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
		// The test provider's TTL loop ranges over a ticker's channel,
		// which Stop never closes (the benchmark's protoactor-go cluster).
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster/clusterproviders/test.(*Provider).startTtlReport.func1"),
		// A remote's endpoint writer to a member that stopped first sleeps
		// up to 2 s between connection attempts, after its own system has
		// shut down (the remote-call benchmark's two members).
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointWriter).initialize"))
}

var testLogger *slog.Logger

func init() {
	if os.Getenv("GRAINS_DEBUG") != "" {
		testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}
