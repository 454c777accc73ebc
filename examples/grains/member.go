//go:build unix

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/natsstore"
)

// memberArg, as the first argument, runs the binary as one member; the
// parent re-executes itself with it. It is not in -help.
const memberArg = "-member"

const kind = "counter"

// callsSubject, with a member's name, starts the member's callers
// ("start"), asks them for their totals ("count"), or stops them and asks
// for their totals ("stop").
const callsSubject = "example.grains.calls."

// totals are a member's callers' counts.
type totals struct {
	OK   int64 `json:"ok"`
	Lost int64 `json:"lost"`
}

var quiet = slog.New(slog.DiscardHandler)

// runMember runs one member until SIGTERM or SIGINT, or until its standard
// input closes (the parent has gone). It prints "ready" once it is a
// member.
func runMember(args []string) int {
	fs := flag.NewFlagSet("grains member", flag.ContinueOnError)
	name := fs.String("name", "", "the member's name")
	url := fs.String("nats", "", "NATS URL")
	ttl := fs.Duration("ttl", 2*time.Second, "the session TTL")
	ids := fs.Int("identities", 16, "callers: the number of counter grains")
	calls := fs.Bool("calls", false, "run callers")
	members := fs.Int("members", 3, "callers: the members to see before calling")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { // the parent holds our stdin open while it runs
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	if err := member(ctx, *name, *url, *ttl, *ids, *calls, *members); err != nil {
		fmt.Fprintf(os.Stderr, "member %s: %v\n", *name, err)
		return 1
	}
	return 0
}

func member(ctx context.Context, name, url string, ttl time.Duration, n int, calls bool, members int) error {
	nc, err := nats.Connect(url, nats.Name(name), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	openCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ns, err := natsstore.NewConn(openCtx, nc, natsstore.Config{Bucket: "aster_grains_example", Timeout: ttl / 2, MaxTTL: ttl})
	if err != nil {
		return err
	}
	defer ns.Close()
	m, err := grains.New(ns, grains.Config{Prefix: "example", TTL: ttl, RenewInterval: ttl / 4})
	if err != nil {
		return err
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	c := cluster.New(sys, cluster.Configure("example", m.Provider(), m.Lookup(), remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(kind, counter(nc, name)))))
	if err := grains.StartMember(c); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = grains.StopMember(cctx, c)
	}()
	if calls {
		cs := &callers{m: m, base: ctx}
		cctx, stopCalls := context.WithCancel(ctx)
		defer stopCalls()
		defer cs.wg.Wait()
		var once sync.Once
		sub, err := nc.Subscribe(callsSubject+name, func(msg *nats.Msg) {
			switch string(msg.Data) {
			case "start": // once it sees the other members, so that the grains spread over them
				for end := time.Now().Add(10 * time.Second); len(m.Members()) < members && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				once.Do(func() { cs.start(cctx, n) })
			case "stop":
				stopCalls()
				cs.wg.Wait()
			}
			b, _ := json.Marshal(totals{OK: cs.ok.Load(), Lost: cs.lost.Load()})
			_ = msg.Respond(b)
		})
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// counter is the counter grain: each message is one write to the parent's
// store, with the activation's tenure, read right before it. A write the
// fence refuses stops the activation: a later one holds the identity.
func counter(nc *nats.Conn, name string) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); !ok {
			return
		}
		a, ok := grains.ActivationOf(c)
		if !ok {
			return
		}
		t, err := a.Tenure() // fails once the activation's session may have ended: it answers nothing
		if err != nil {
			return
		}
		b, _ := json.Marshal(writeReq{ID: a.Identity(), Member: name, Token: t.Token, Term: t.Term, Sent: time.Now().UnixNano()})
		msg, err := nc.Request(storeSubject, b, time.Second)
		var ans writeAns
		if err != nil || json.Unmarshal(msg.Data, &ans) != nil {
			return // the caller tries again
		}
		if ans.Refused {
			c.Stop(c.Self())
			return
		}
		c.Respond(&wrapperspb.Int64Value{Value: ans.N})
	})
}

// callers call every identity in turn until ctx ends; a call that does not
// succeed within its 20 s deadline is lost. Each attempt is bounded, so
// that a message an activation did not answer is sent again.
type callers struct {
	m        *grains.Member
	base     context.Context // the member's: ends the calls in flight
	wg       sync.WaitGroup
	ok, lost atomic.Int64
}

func (cs *callers) start(ctx context.Context, n int) {
	for w := range 4 {
		cs.wg.Go(func() {
			for i := w % n; ctx.Err() == nil; i = (i + 4) % n {
				if cs.call(fmt.Sprintf("counter-%d", i)) {
					cs.ok.Add(1)
				} else {
					cs.lost.Add(1)
				}
				select { // about 800 calls a second in all: enough to see every move
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
}

func (cs *callers) call(id string) bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && cs.base.Err() == nil {
		ctx, cancel := context.WithTimeout(cs.base, min(time.Until(deadline), 3*time.Second))
		res, err := cs.m.Request(ctx, kind, id, &wrapperspb.StringValue{Value: id})
		cancel()
		if v, ok := res.(*wrapperspb.Int64Value); err == nil && ok && v.GetValue() > 0 {
			return true
		}
	}
	return false
}
