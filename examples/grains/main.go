// Command grains shows virtual actors (package grains) on protoactor-go's
// cluster: three members in this process, each with a NATS connection of
// its own through a proxy, run a counter grain per identity whose writes
// go through a fence in a shared store. Callers keep calling while one
// member is killed (its remote stopped and its NATS connection cut for
// good) and another is partitioned from NATS for three TTLs. It prints a
// verdict and exits: duplicate activations (two activations of one
// identity handling messages at once), calls lost (a call that did not
// succeed within its deadline) and stale writes accepted (a write the
// store took with a token below one it took before) must all be 0.
//
//	go run ./examples/grains [-ttl 2s] [-identities 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
)

const kind = "counter"

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

func run(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("grains", flag.ContinueOnError)
	ttl := fs.Duration("ttl", 2*time.Second, "the members' session TTL, whole seconds")
	ids := fs.Int("identities", 16, "number of counter grains")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := scenario(ctx, out, *ttl, *ids); err != nil {
		fmt.Fprintln(out, "grains:", err)
		return 1
	}
	return 0
}

// member is one member of the example.
type member struct {
	name  string
	m     *grains.Member
	c     *cluster.Cluster
	proxy *proxy
	nc    *nats.Conn
	st    *natsstore.Store
}

var quiet = slog.New(slog.DiscardHandler)

func startMember(ctx context.Context, name, url string, cfg grains.Config, st *store) (*member, error) {
	p, err := startProxy(url[len("nats://"):])
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(p.url(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		p.close()
		return nil, err
	}
	ns, err := natsstore.NewConn(ctx, nc, natsstore.Config{Bucket: "aster_grains_example"})
	if err != nil {
		nc.Close()
		p.close()
		return nil, err
	}
	m, err := grains.New(ns, cfg)
	if err != nil {
		return nil, err
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	c := cluster.New(sys, cluster.Configure("example", m.Provider(), m.Lookup(), remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(kind, st.props()))))
	if err := grains.StartMember(c); err != nil {
		return nil, err
	}
	return &member{name: name, m: m, c: c, proxy: p, nc: nc, st: ns}, nil
}

func (mb *member) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = mb.m.Close(ctx)
	mb.c.Gossip.Shutdown()
	mb.c.Remote.Shutdown(false)
	mb.c.ActorSystem.Shutdown()
	_ = mb.st.Close()
	mb.nc.Close()
	mb.proxy.close()
}

// kill stops the member's remote and cuts its NATS connection for good:
// its activations stop when its session passes its renew deadline, and
// its locks are taken once the store judges the session ended.
func (mb *member) kill() {
	mb.proxy.freeze(true)
	mb.c.Remote.Shutdown(false)
}

func scenario(ctx context.Context, out io.Writer, ttl time.Duration, n int) error {
	srv, err := embedded.Start(ctx, embedded.Config{})
	if err != nil {
		return err
	}
	defer srv.Close()
	st := newStore()
	cfg := grains.Config{Prefix: "example", TTL: ttl, RenewInterval: ttl / 4}
	var ms []*member
	defer func() {
		for _, mb := range ms {
			mb.stop()
		}
	}()
	for _, name := range []string{"a", "b", "c"} {
		mb, err := startMember(ctx, name, srv.ClientURL(), cfg, st)
		if err != nil {
			return fmt.Errorf("start member %s: %w", name, err)
		}
		ms = append(ms, mb)
		st.name(mb.m.ID(), name)
		fmt.Fprintf(out, "member %s joined (%s)\n", name, mb.m.ID())
	}
	calls := &callers{}
	cctx, stopCalls := context.WithCancel(ctx)
	calls.start(cctx, ms[0], n)
	step := func(what string, d time.Duration) {
		fmt.Fprintf(out, "%-48s calls ok %d, failed %d\n", what, calls.ok.Load(), calls.lost.Load())
		time.Sleep(d)
	}
	step("warm-up", 2*ttl)
	ms[2].kill()
	step("member c killed", 4*ttl)
	ms[1].proxy.freeze(true)
	step("member b partitioned from NATS", 3*ttl)
	ms[1].proxy.freeze(false)
	step("member b healed", 3*ttl)
	stopCalls()
	calls.wg.Wait()
	fmt.Fprintf(out, "%-48s calls ok %d, failed %d\n", "done", calls.ok.Load(), calls.lost.Load())

	dups, stale, moved := st.verdict()
	fmt.Fprintf(out, "\nactivations: %d identities moved at least once\n", moved)
	fmt.Fprintf(out, "duplicate activations: %d\ncalls lost: %d\nstale writes accepted: %d (writes refused by the fence: %d)\n",
		dups, calls.lost.Load(), stale, st.refusedWrites())
	if dups == 0 && calls.lost.Load() == 0 && stale == 0 && calls.ok.Load() > 0 {
		fmt.Fprintln(out, "PASS")
		return nil
	}
	fmt.Fprintln(out, "FAIL")
	return fmt.Errorf("the verdict failed")
}

// callers call every identity in turn from one member until ctx ends;
// a call that does not succeed within its 20 s deadline is lost.
type callers struct {
	wg       sync.WaitGroup
	ok, lost atomic.Int64
}

func (cs *callers) start(ctx context.Context, mb *member, n int) {
	for w := range 4 {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for i := w; ctx.Err() == nil; i = (i + 4) % n {
				id := fmt.Sprintf("counter-%d", i)
				cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := mb.m.Request(cctx, kind, id, &wrapperspb.StringValue{Value: id})
				cancel()
				if err != nil {
					cs.lost.Add(1)
					continue
				}
				cs.ok.Add(1)
				select { // about 800 calls a second in all: enough to see every move
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
}
