package supervision_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/supervision"
)

// runForBench runs spec in sys until the benchmark ends.
func runForBench(b *testing.B, sys *actorsys.System, spec supervision.Spec) *supervision.Tree {
	b.Helper()
	tree, err := supervision.New(spec, supervision.Options{System: sys.ActorSystem})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tree.Run(ctx) }()
	if err := tree.WaitRunning(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		sys.Shutdown()
	})
	return tree
}

// reportPercentiles reports the p50 and p99 of samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration { return samples[min(len(samples)-1, int(q*float64(len(samples))))] }
	b.ReportMetric(float64(at(0.50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(at(0.99).Nanoseconds()), "p99-ns")
}

// BenchmarkRestartLatency measures the time from a child's failure (the
// send of the message that makes it panic) to its next incarnation having
// processed Started, with an immediate backoff.
func BenchmarkRestartLatency(b *testing.B) {
	b.Run("actor", func(b *testing.B) {
		ready := make(chan struct{}, 1)
		props := actor.PropsFromFunc(func(c actor.Context) {
			switch c.Message().(type) {
			case *actor.Started:
				ready <- struct{}{}
			case boom:
				panic("boom")
			}
		})
		benchRestart(b, supervision.ChildSpec{Name: "w", Props: props}, ready, func(sys *actorsys.System, pid *actor.PID) {
			sys.Root.Send(pid, boom{})
		})
	})
	b.Run("func", func(b *testing.B) {
		ready := make(chan struct{}, 1)
		fail := make(chan struct{})
		fn := func(ctx context.Context) error {
			ready <- struct{}{}
			select {
			case <-fail:
				panic("boom")
			case <-ctx.Done():
				return nil
			}
		}
		benchRestart(b, supervision.ChildSpec{Name: "w", Func: fn}, ready, func(*actorsys.System, *actor.PID) {
			fail <- struct{}{}
		})
	})
}

func benchRestart(b *testing.B, child supervision.ChildSpec, ready chan struct{}, crash func(*actorsys.System, *actor.PID)) {
	child.Backoff = supervision.Backoff{Immediate: true}
	sys := actorsys.New(nil)
	tree := runForBench(b, sys, supervision.Spec{
		Name: "bench", Intensity: 1 << 30, Period: time.Millisecond,
		Children: []supervision.ChildSpec{child},
	})
	<-ready
	pid := tree.Snapshot().Children[0].PID
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		crash(sys, pid)
		<-ready
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, samples)
}

// tick is the message of the throughput benchmark; a zero-size value, so
// that sending it allocates nothing.
type tick struct{}

// counter returns props of an actor that signals done after every batch
// messages.
func counter(batch int, done chan<- struct{}) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		n := 0
		return actor.ReceiveFunc(func(c actor.Context) {
			if _, ok := c.Message().(tick); ok {
				n++
				if n == batch {
					n = 0
					done <- struct{}{}
				}
			}
		})
	})
}

// BenchmarkThroughput sends batches of messages to a bare protoactor-go
// actor and to the same actor supervised by a tree, in the same run, and
// reports the supervised actor's throughput as a ratio of the bare one's
// (goal: at least 0.95; the supervisor is not on the message path, so it
// should be 1 within noise). Each round sends one batch to each, in
// alternating order; supervised/bare is the median of the rounds' ratios,
// which a burst of load from other processes on the machine skews less than
// a ratio of totals.
func BenchmarkThroughput(b *testing.B) {
	const batch = 2_000
	sys := actorsys.New(nil)
	bareDone, supDone := make(chan struct{}), make(chan struct{})
	bare := sys.Root.Spawn(counter(batch, bareDone))
	tree := runForBench(b, sys, supervision.Spec{Name: "bench", Children: []supervision.ChildSpec{
		{Name: "counter", Props: counter(batch, supDone)},
	}})
	b.Cleanup(func() { _ = sys.Root.StopFuture(bare).Wait() })
	sup := tree.Snapshot().Children[0].PID

	send := func(pid *actor.PID, done chan struct{}) time.Duration {
		t0 := time.Now()
		for range batch {
			sys.Root.Send(pid, tick{})
		}
		<-done
		return time.Since(t0)
	}
	var bareTotal, supTotal time.Duration
	var ratios []float64
	b.ResetTimer()
	for b.Loop() {
		var bt, st time.Duration
		if len(ratios)%2 == 0 {
			bt = send(bare, bareDone)
			st = send(sup, supDone)
		} else {
			st = send(sup, supDone)
			bt = send(bare, bareDone)
		}
		bareTotal += bt
		supTotal += st
		ratios = append(ratios, bt.Seconds()/st.Seconds())
	}
	b.StopTimer()
	msgs := float64(len(ratios) * batch)
	slices.Sort(ratios)
	b.ReportMetric(float64(bareTotal.Nanoseconds())/msgs, "bare-ns/msg")
	b.ReportMetric(float64(supTotal.Nanoseconds())/msgs, "supervised-ns/msg")
	b.ReportMetric(ratios[len(ratios)/2], "supervised/bare")
}
