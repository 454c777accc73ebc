//go:build !race

package grains_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/internal/natstest"
)

// echo answers every StringValue with an Int64Value: the grain of the
// benchmarks, the same for both lookups.
func echoProps() *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); ok {
			c.Respond(&wrapperspb.Int64Value{Value: 1})
		}
	})
}

// benchCluster starts one member: ours (grains, on a real nats-server) or
// protoactor-go's own (the in-memory test provider and disthash).
func benchCluster(b *testing.B, ours bool) *cluster.Cluster {
	b.Helper()
	if ours {
		return startMemberProps(b, natstest.Start(b), echoProps()).c
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	c := cluster.New(sys, cluster.Configure("bench", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(cluster.NewKind(kind, echoProps()))))
	c.StartMember()
	b.Cleanup(func() { c.Shutdown(false) })
	return c
}

func call(b *testing.B, c *cluster.Cluster, id string) time.Duration {
	start := time.Now()
	res, err := c.Request(id, kind, &wrapperspb.StringValue{Value: id}, cluster.WithTimeout(20*time.Second))
	if err != nil || res == nil {
		b.Fatalf("call %s: %v", id, err)
	}
	return time.Since(start)
}

func quantiles(b *testing.B, ds []time.Duration, name string) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), name+"-p50-us")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), name+"-p99-us")
}

// BenchmarkGrainCall measures a call to an activated grain, its first
// activation, and the heap per activation at 10,000 activations, for both
// lookups, in one run:
//
//	go test -run '^$' -bench BenchmarkGrainCall -benchtime 2000x ./grains
func BenchmarkGrainCall(b *testing.B) {
	for _, lk := range []struct {
		name string
		ours bool
	}{{"grains", true}, {"disthash", false}} {
		b.Run(lk.name, func(b *testing.B) {
			c := benchCluster(b, lk.ours)
			call(b, c, "warm")
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				ds = append(ds, call(b, c, "warm"))
			}
			b.StopTimer()
			quantiles(b, ds, "call")

			const n = 10_000
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			first := make([]time.Duration, 0, n)
			for i := range n {
				first = append(first, call(b, c, fmt.Sprintf("g%d", i)))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			quantiles(b, first, "first")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/activation")
		})
	}
}

// whereProps answers every StringValue with the address of the member its
// activation runs on.
func whereProps() *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); ok {
			c.Respond(&wrapperspb.StringValue{Value: c.Self().Address})
		}
	})
}

// benchPair starts two members of one cluster: ours (grains, on a real
// nats-server) or protoactor-go's own (the in-memory test provider and
// disthash), and waits until each sees both.
func benchPair(b *testing.B, ours bool) (*cluster.Cluster, *cluster.Cluster) {
	b.Helper()
	if ours {
		srv := natstest.Start(b)
		x, y := startMemberProps(b, srv, whereProps()), startMemberProps(b, srv, whereProps())
		deadline := time.Now().Add(10 * time.Second)
		for len(x.m.Members()) != 2 || len(y.m.Members()) != 2 {
			if time.Now().After(deadline) {
				b.Fatal("the two members did not see each other within 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return x.c, y.c
	}
	agent := test.NewInMemAgent()
	start := func() *cluster.Cluster {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
		c := cluster.New(sys, cluster.Configure("bench", test.NewTestProvider(agent), disthash.New(),
			remote.Configure("127.0.0.1", 0), cluster.WithKinds(cluster.NewKind(kind, whereProps()))))
		c.StartMember()
		b.Cleanup(func() { c.Shutdown(true) })
		return c
	}
	x, y := start(), start()
	deadline := time.Now().Add(10 * time.Second)
	for len(x.MemberList.Members().Members()) != 2 || len(y.MemberList.Members().Members()) != 2 {
		if time.Now().After(deadline) {
			b.Fatal("the two members did not see each other within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return x, y
}

// where calls id from c and returns the address of the member it runs on.
func where(b *testing.B, c *cluster.Cluster, id string) string {
	res, err := c.Request(id, kind, &wrapperspb.StringValue{Value: id}, cluster.WithTimeout(20*time.Second))
	if err != nil {
		b.Fatalf("call %s: %v", id, err)
	}
	v, ok := res.(*wrapperspb.StringValue)
	if !ok {
		b.Fatalf("call %s: answer %T", id, res)
	}
	return v.Value
}

// BenchmarkGrainCallRemote measures a call from one member to a grain
// activated on the other (a remote call over protoactor-go's gRPC), and
// the first activations of 1,000 identities called from one member (about
// half of them activated on the other), for both lookups, in one run:
//
//	go test -run '^$' -bench BenchmarkGrainCallRemote -benchtime 2000x ./grains
func BenchmarkGrainCallRemote(b *testing.B) {
	for _, lk := range []struct {
		name string
		ours bool
	}{{"grains", true}, {"disthash", false}} {
		b.Run(lk.name, func(b *testing.B) {
			x, y := benchPair(b, lk.ours)
			here := x.ActorSystem.Address()
			const n = 1_000
			first := make([]time.Duration, 0, n)
			remoteID, remotes := "", 0
			for i := range n {
				id := fmt.Sprintf("r%d", i)
				start := time.Now()
				at := where(b, x, id)
				first = append(first, time.Since(start))
				if at != here {
					remotes++
					remoteID = id
				}
			}
			if remoteID == "" {
				b.Fatalf("none of %d identities was activated on the other member (%s)", n, y.ActorSystem.Address())
			}
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				where(b, x, remoteID)
				ds = append(ds, time.Since(start))
			}
			b.StopTimer()
			quantiles(b, ds, "remote-call")
			quantiles(b, first, "first")
			b.ReportMetric(float64(remotes)/n*100, "%remote")
		})
	}
}
