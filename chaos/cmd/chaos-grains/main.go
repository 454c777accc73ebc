// Command chaos-grains is a member of a cluster of virtual actors for the
// chaos suite: protoactor-go's cluster with package grains as its provider
// and, with -lookup aster, as its identity lookup (each activation holds a
// lock with a fencing token under the member's session), or, with -lookup
// disthash, protoactor-go's own disthash lookup over the same membership;
// or, with -lookup automanaged, protoactor-go's own cluster, its
// automanaged provider (on loopback, -am-port and -am-hosts) and disthash,
// with nothing of package grains and no NATS.
// Its counter grains write through the suite's fenced resource, one write
// per message, under the lease ID grains.<identity>: with the activation's
// tenure (aster), or with token 0 and a term of the activation's own
// (disthash, automanaged: no token, and their writes are judged without
// the fence).
//
// With -calls, the process also runs -callers callers that call the
// -identities grains in turn, once it sees -members members, and appends
// every call to that file (record.Call, JSON lines): a call is lost when
// it did not succeed within -call-timeout (each attempt bounded by
// -attempt).
//
// It prints "ready" once it is a member (and, with -calls, sees -members
// members). SIGUSR1 stops the callers (their calls in flight finish; it
// prints "callers stopped"); SIGTERM leaves the cluster.
//
// The suite builds it without the race detector, as every process it
// starts: here it would also report a race inside protoactor-go, whose
// remote.Start writes grpc's global logger (grpclog.SetLoggerV2) while
// gRPC goroutines read it, whatever this program does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

const kind = "counter"

type options struct {
	natsURL, fenceURL, proc, bucket, prefix, lookup, calls, amHosts string
	ttl, renew, callTimeout, attempt, every                         time.Duration
	identities, callers, members, amPort                            int
}

func main() {
	var o options
	flag.StringVar(&o.natsURL, "nats", "nats://127.0.0.1:4222", "NATS URL")
	flag.StringVar(&o.fenceURL, "fence", "", "base URL of the fenced resource (required)")
	flag.StringVar(&o.proc, "proc", "member", "process name in the records")
	flag.StringVar(&o.bucket, "bucket", natsstore.DefaultBucket, "KV bucket")
	flag.StringVar(&o.prefix, "prefix", "chaos-grains", "grains.Config.Prefix (and the cluster's name)")
	flag.StringVar(&o.lookup, "lookup", "aster", "identity lookup: aster (package grains), disthash (protoactor-go's, "+
		"over package grains' membership) or automanaged (protoactor-go's automanaged provider and disthash)")
	flag.DurationVar(&o.ttl, "ttl", 2*time.Second, "the members' lease and session TTL (automanaged: its refresh)")
	flag.IntVar(&o.amPort, "am-port", 0, "automanaged: the loopback port of this member's /_health")
	flag.StringVar(&o.amHosts, "am-hosts", "", "automanaged: 127.0.0.1:port of every member, comma-separated")
	flag.DurationVar(&o.renew, "renew", 500*time.Millisecond, "renew interval")
	flag.StringVar(&o.calls, "calls", "", "run callers, and append their calls to this file")
	flag.IntVar(&o.identities, "identities", 16, "callers: the number of grains called")
	flag.IntVar(&o.callers, "callers", 4, "callers: how many call at once")
	flag.IntVar(&o.members, "members", 1, "callers: start calling once this many members are seen")
	flag.DurationVar(&o.callTimeout, "call-timeout", 20*time.Second, "callers: a call not done by then is lost")
	flag.DurationVar(&o.attempt, "attempt", 3*time.Second, "callers: the bound of one attempt of a call")
	flag.DurationVar(&o.every, "every", 5*time.Millisecond, "callers: the pause after each call")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-grains:", err)
		os.Exit(1)
	}
}

var quiet = slog.New(slog.DiscardHandler)

func run(ctx context.Context, o options) error {
	if o.fenceURL == "" {
		return errors.New("-fence is required")
	}
	// SIGUSR1 stops the callers (their calls in flight finish); the
	// member goes on until SIGTERM.
	calling, stopCalls := signal.NotifyContext(ctx, syscall.SIGUSR1)
	defer stopCalls()
	fence := resource.NewClient(o.fenceURL)
	defer fence.Close()
	g := &grain{o: o, fence: fence}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	remoting := remote.Configure("127.0.0.1", 0)
	kinds := cluster.WithKinds(cluster.NewKind(kind, g.props()))

	var mb member
	switch o.lookup {
	case "aster", "disthash":
		m, closeStore, err := grainsMember(ctx, o)
		if err != nil {
			return err
		}
		defer closeStore()
		lookup := m.Lookup()
		if o.lookup == "disthash" {
			lookup = disthash.New()
		}
		c := cluster.New(sys, cluster.Configure(o.prefix, m.Provider(), lookup, remoting, kinds))
		mb = member{c: c, m: m, id: m.ID, members: func() int { return len(m.Members()) },
			stop: func(ctx context.Context) { _ = grains.StopMember(ctx, c) }}
	case "automanaged":
		var err error
		if mb, err = automanagedMember(sys, o, remoting, kinds); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown -lookup %q", o.lookup)
	}
	if err := grains.StartMember(mb.c); err != nil { // only recovers cluster.StartMember's panic
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mb.stop(cctx)
	}()
	fmt.Printf("member %s (%s, lookup %s)\n", o.proc, mb.id(), o.lookup)
	if o.calls == "" {
		fmt.Println("ready")
		<-calling.Done()
		fmt.Println("callers stopped")
		<-ctx.Done()
		return nil
	}
	for mb.members() < o.members {
		select {
		case <-calling.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	out, err := os.OpenFile(o.calls, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cs := &callers{o: o, m: mb.m, c: mb.c, out: out}
	fmt.Println("ready")
	cs.run(calling)
	if cs.err != nil {
		return cs.err
	}
	fmt.Println("callers stopped")
	<-ctx.Done()
	return nil
}

// member is the process's cluster member, whichever its provider.
type member struct {
	c       *cluster.Cluster
	m       *grains.Member // nil with -lookup automanaged
	id      func() string
	members func() int                // the members it sees
	stop    func(ctx context.Context) // leaves the cluster and stops the actor system
}

// grainsMember opens the store and makes the grains.Member (-lookup aster
// or disthash); closeStore closes the store and the NATS connection.
func grainsMember(ctx context.Context, o options) (m *grains.Member, closeStore func(), err error) {
	nc, err := nats.Connect(o.natsURL, nats.Name(o.proc), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.Timeout(time.Second), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, nil, err
	}
	openCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	store, err := natsstore.NewConn(openCtx, nc, natsstore.Config{Bucket: o.bucket, Timeout: o.ttl / 2,
		MaxTTL: o.ttl})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	closeStore = func() {
		_ = store.Close()
		nc.Close()
	}
	m, err = grains.New(store, grains.Config{Prefix: o.prefix, TTL: o.ttl, RenewInterval: o.renew})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return m, closeStore, nil
}

// grain is the counter kind: each message is one fenced write.
type grain struct {
	o     options
	fence *resource.Client
}

// Answers of the counter grain, besides 1 (the write was accepted).
const (
	answerRefused = -1 // the fence refused the activation's tenure: it stops
	answerFailed  = -2 // the write's answer did not come
)

func (g *grain) props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &counter{g: g} })
}

// counter is one activation.
type counter struct {
	g    *grain
	term string // disthash: the activation's own, as it has no tenure
}

func (a *counter) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		a.term = lease.NewOwnerID()
	case *wrapperspb.StringValue:
		a.handle(c)
	}
}

// handle makes the message's write: with the activation's tenure, read on
// the clock right before it (aster), or with the activation's own term
// (disthash, whose writes have no token and are judged without the fence).
func (a *counter) handle(c actor.Context) {
	ci := cluster.GetClusterIdentity(c)
	if ci == nil {
		return
	}
	offer := resource.Offer{Lease: "grains." + ci.Identity, Proc: a.g.o.proc, Owner: c.Self().Address}
	fenced := false
	if act, ok := grains.ActivationOf(c); ok && a.g.o.lookup == "aster" {
		t, err := act.Tenure()
		if err != nil {
			return // never: the gate let the message in
		}
		offer.Owner, offer.Tenure, fenced = act.Member(), t, true
	} else {
		offer.Tenure = lease.Tenure{Term: a.term}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := a.g.fence.Write(ctx, offer)
	switch {
	case err == nil, !fenced && errors.Is(err, resource.ErrStale):
		c.Respond(&wrapperspb.Int64Value{Value: 1})
	case errors.Is(err, resource.ErrStale):
		c.Respond(&wrapperspb.Int64Value{Value: answerRefused})
		c.Stop(c.Self())
	default:
		c.Respond(&wrapperspb.Int64Value{Value: answerFailed})
	}
}

// callers call the identities in turn and record every call.
type callers struct {
	o   options
	m   *grains.Member
	c   *cluster.Cluster
	mu  sync.Mutex
	out *os.File
	err error
}

func (cs *callers) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := range cs.o.callers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i = (i + cs.o.callers) % cs.o.identities {
				cs.record(cs.call(fmt.Sprintf("g%d", i)))
				select {
				case <-ctx.Done():
				case <-time.After(cs.o.every):
				}
			}
		})
	}
	wg.Wait()
}

// call calls identity until it succeeds or its deadline passes, each
// attempt bounded by -attempt.
func (cs *callers) call(identity string) record.Call {
	call := record.Call{Proc: cs.o.proc, Identity: identity, Sent: record.Now()}
	deadline := time.Now().Add(cs.o.callTimeout)
	var last error
	for time.Now().Before(deadline) {
		call.Attempts++
		wait := min(time.Until(deadline), cs.o.attempt)
		var res any
		var err error
		if cs.o.lookup == "aster" {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			res, err = cs.m.Request(ctx, kind, identity, &wrapperspb.StringValue{Value: identity})
			cancel()
		} else {
			res, err = cs.c.Request(identity, kind, &wrapperspb.StringValue{Value: identity}, cluster.WithTimeout(wait))
		}
		if err == nil {
			if v, ok := res.(*wrapperspb.Int64Value); ok && v.GetValue() == 1 {
				call.OK, call.Done = true, record.Now()
				return call
			}
			err = fmt.Errorf("answer %v", res)
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	call.Done = record.Now()
	if last != nil {
		call.Err = last.Error()
	}
	return call
}

func (cs *callers) record(call record.Call) {
	b, err := json.Marshal(call)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err == nil {
		_, err = cs.out.Write(append(b, '\n'))
	}
	if err != nil && cs.err == nil {
		cs.err = err
	}
}
