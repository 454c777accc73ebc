package singleton_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/singleton"
	"github.com/asterforge/aster/supervision"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

const leaseID = "test.sequencer"

var testLogger *slog.Logger

func init() {
	if os.Getenv("SINGLETON_DEBUG") != "" {
		testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// rig is a NATS server, an in-memory lease store, and the instances that
// compete for the lease.
type rig struct {
	t   testing.TB
	srv *natstest.Server
	mem *leasetest.MemStore
	lc  lease.Config
}

func newRig(t testing.TB) *rig {
	mem := leasetest.NewMemStore()
	t.Cleanup(func() { _ = mem.Close() })
	return &rig{t: t, srv: natstest.Start(t), mem: mem,
		lc: lease.Config{LeaseID: leaseID, TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond,
			StandbyRetryInterval: time.Minute}}
}

func (r *rig) conn() *nats.Conn {
	nc, err := nats.Connect(r.srv.ClientURL())
	require.NoError(r.t, err)
	r.t.Cleanup(nc.Close)
	return nc
}

// instance is one candidate serving the singleton while it leads.
type instance struct {
	name   string
	sup    *actors.LeaseSupervisor
	faults *leasetest.FaultStore
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// start starts an instance whose handler is h.
func (r *rig) start(name string, h singleton.Handler) *instance {
	in := &instance{name: name, faults: leasetest.NewFaultStore(r.mem), nc: r.conn(), done: make(chan error, 1)}
	lc := r.lc
	lc.OwnerID = name
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lc, Store: in.faults, Logger: testLogger,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			return singleton.Serve(ctx, in.nc, singleton.ServeConfig{DrainTimeout: 100 * time.Millisecond}, h)
		}),
		Restart: actors.RestartPolicy{Backoff: supervision.Backoff{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond},
			Intensity: supervision.Unlimited},
	})
	require.NoError(r.t, err)
	in.sup = sup
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { in.done <- sup.Run(ctx) }()
	r.t.Cleanup(func() { in.stop() })
	return in
}

func (in *instance) stop() {
	if in.cancel != nil {
		in.cancel()
		<-in.done
		in.cancel = nil
	}
}

// leading waits until in leads.
func (in *instance) leading(t testing.TB) lease.Token {
	t.Helper()
	require.Eventually(t, func() bool { return in.sup.Status().State == actors.StateLeading }, 10*time.Second, time.Millisecond)
	return in.sup.Status().Token
}

func (r *rig) client(cfg singleton.ClientConfig) *singleton.Client {
	cfg.LeaseID = leaseID
	cfg.Watcher = r.mem
	c, err := singleton.NewClient(r.conn(), cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// echo answers with the instance's name and the request's data.
func echo(name string) singleton.Handler {
	return func(_ context.Context, req *singleton.Request) ([]byte, error) {
		return []byte(name + ":" + string(req.Data)), nil
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRequestReachesTheLeader(t *testing.T) {
	r := newRig(t)
	a := r.start("a", echo("a"))
	token := a.leading(t)
	r.start("b", echo("b")) // a standby: requests reach a only
	c := r.client(singleton.ClientConfig{})
	rep, err := c.Request(ctxFor(t, 5*time.Second), []byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, "a:hello", string(rep.Data))
	assert.Equal(t, token, rep.Tenure.Token, "the reply names the tenure that answered")
	assert.Equal(t, a.sup.Status().Term, rep.Tenure.Term)
	assert.Equal(t, 1, rep.Attempts)
	assert.Len(t, rep.ID, 32)

}

// A handler's error reaches the caller as a *HandlerError, and the request
// is not sent again.
func TestHandlerErrorIsNotRetried(t *testing.T) {
	r := newRig(t)
	var calls atomic.Int32
	a := r.start("a", func(context.Context, *singleton.Request) ([]byte, error) {
		calls.Add(1)
		return nil, errors.New("no such invoice")
	})
	token := a.leading(t)
	c := r.client(singleton.ClientConfig{})
	_, err := c.Request(ctxFor(t, 5*time.Second), []byte("x"))
	var he *singleton.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "no such invoice", he.Message)
	assert.Equal(t, token, he.Tenure.Token)
	assert.Equal(t, int32(1), calls.Load())
}

// While the leader steps down again and again, under a steady load of
// requests with a 1 s deadline, no request fails: each waits for the next
// leader, woken by the watch, and is sent again.
func TestHandoverUnderLoadLosesNoRequest(t *testing.T) {
	r := newRig(t)
	var handled sync.Map // request ID -> handlings
	h := func(name string) singleton.Handler {
		return func(_ context.Context, req *singleton.Request) ([]byte, error) {
			n, _ := handled.LoadOrStore(req.ID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return []byte(name), nil
		}
	}
	ins := []*instance{r.start("a", h("a")), r.start("b", h("b"))}
	current := func(after lease.Token) *instance {
		var leader *instance
		require.Eventually(t, func() bool {
			for _, in := range ins {
				if st := in.sup.Status(); st.State == actors.StateLeading && st.Token > after {
					leader = in
					return true
				}
			}
			return false
		}, 10*time.Second, time.Millisecond)
		return leader
	}
	current(0)
	c := r.client(singleton.ClientConfig{})

	stop := make(chan struct{})
	var (
		wg             sync.WaitGroup
		ok, failed     atomic.Int64
		firstErr       atomic.Value
		mostAttempts   atomic.Int32
		answeredBy     sync.Map
		handoversSeen  atomic.Int32
		previousAnswer atomic.Value
	)
	previousAnswer.Store("")
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := c.Request(ctxFor(t, time.Second), []byte("x"))
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
				answeredBy.Store(string(rep.Data), true)
				if prev := previousAnswer.Swap(string(rep.Data)); prev != string(rep.Data) {
					handoversSeen.Add(1)
				}
				for m := mostAttempts.Load(); int32(rep.Attempts) > m && !mostAttempts.CompareAndSwap(m, int32(rep.Attempts)); m = mostAttempts.Load() {
				}
			}
		})
	}
	const handovers = 20
	var last lease.Token
	for range handovers {
		leader := current(last)
		last = leader.sup.Status().Token
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, leader.sup.Resign(ctxFor(t, 5*time.Second), 50*time.Millisecond))
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		t.Errorf("first failure: %v", err)
	}
	assert.Zero(t, failed.Load(), "requests failed during %d handovers (%d succeeded)", handovers, ok.Load())
	assert.Greater(t, ok.Load(), int64(100))
	_, a := answeredBy.Load("a")
	_, b := answeredBy.Load("b")
	assert.True(t, a && b, "both instances answered")
	t.Logf("%d requests over %d handovers, none failed; at most %d attempts for one request", ok.Load(), handovers, mostAttempts.Load())
}

// A request that reaches a term after it stopped being valid is refused,
// never handled, and is sent again to the next leader.
func TestRequestToATermPastItsValidityIsRefused(t *testing.T) {
	r := newRig(t)
	type handling struct {
		id     string
		tenure lease.Tenure
	}
	var (
		mu   sync.Mutex
		seen []handling
	)
	first := make(chan struct{})
	h := func(ctx context.Context, req *singleton.Request) ([]byte, error) {
		mu.Lock()
		seen = append(seen, handling{req.ID, req.Tenure})
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-ctx.Done() // the first request holds the leader until its term is lost
		}
		return []byte(strconv.FormatUint(uint64(req.Tenure.Token), 10)), nil
	}
	a := r.start("a", h)
	tokenA := a.leading(t)
	c := r.client(singleton.ClientConfig{})
	go func() { _, _ = c.Request(ctxFor(t, 10*time.Second), []byte("first")) }()
	<-first
	// The second request waits behind the first on a's subscription. a's
	// renewals now fail: its term ends at its renew deadline.
	a.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable)
	r.start("b", h)
	rep, err := c.Request(ctxFor(t, 10*time.Second), []byte("second"))
	require.NoError(t, err)
	assert.NotEqual(t, tokenA, rep.Tenure.Token, "answered by the next term")
	assert.GreaterOrEqual(t, rep.Attempts, 2, "refused, then sent again")
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if s.id == rep.ID {
			assert.Equal(t, rep.Tenure, s.tenure, "the second request was handled only by the next term")
		}
	}
}

// A request in flight when its leader crashes is sent again, after its
// attempt's timeout, to the next leader once it leads.
func TestRequestInFlightAtACrashIsSentAgain(t *testing.T) {
	r := newRig(t)
	block := make(chan struct{})
	defer close(block)
	a := r.start("a", func(ctx context.Context, req *singleton.Request) ([]byte, error) {
		<-block // crashes before it answers
		return nil, nil
	})
	a.leading(t)
	b := r.start("b", echo("b"))
	c := r.client(singleton.ClientConfig{AttemptTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	var rep *singleton.Reply
	go func() {
		var err error
		rep, err = c.Request(ctxFor(t, 10*time.Second), []byte("x"))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	// The crash: a's connection is gone and its store calls fail; its
	// lease expires at the store.
	a.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable)
	a.nc.Close()
	require.NoError(t, <-done)
	assert.Equal(t, "b:x", string(rep.Data))
	assert.GreaterOrEqual(t, rep.Attempts, 2)
	_ = b
}

func TestNoLeaderEndsAtTheDeadline(t *testing.T) {
	r := newRig(t)
	c := r.client(singleton.ClientConfig{RetryInterval: 20 * time.Millisecond})
	_, err := c.Request(ctxFor(t, 200*time.Millisecond), []byte("x"))
	require.ErrorIs(t, err, singleton.ErrNoLeader)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "no responders")
	assert.Zero(t, c.Pending())
}

func TestBufferPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy      singleton.Overflow
		failedFirst bool // which request gets ErrBufferFull: the first (dropped) or the new one
	}{
		{singleton.OverflowReject, false},
		{singleton.OverflowDropOldest, true},
	} {
		t.Run(fmt.Sprint(tc.policy), func(t *testing.T) {
			r := newRig(t)
			c := r.client(singleton.ClientConfig{MaxPending: 1, Overflow: tc.policy, RetryInterval: 10 * time.Millisecond})
			firstErr := make(chan error, 1)
			go func() {
				_, err := c.Request(ctxFor(t, 2*time.Second), []byte("first"))
				firstErr <- err
			}()
			require.Eventually(t, func() bool { return c.Pending() == 1 }, 5*time.Second, time.Millisecond)
			_, err := c.Request(ctxFor(t, 300*time.Millisecond), []byte("second"))
			if tc.failedFirst {
				require.ErrorIs(t, <-firstErr, singleton.ErrBufferFull)
				require.ErrorIs(t, err, singleton.ErrNoLeader, "the new one waited until its deadline")
			} else {
				require.ErrorIs(t, err, singleton.ErrBufferFull)
				require.ErrorIs(t, <-firstErr, singleton.ErrNoLeader)
			}
		})
	}
}

func TestClosedClient(t *testing.T) {
	r := newRig(t)
	c := r.client(singleton.ClientConfig{RetryInterval: 10 * time.Millisecond})
	errs := make(chan error, 1)
	go func() {
		_, err := c.Request(ctxFor(t, 5*time.Second), []byte("x"))
		errs <- err
	}()
	require.Eventually(t, func() bool { return c.Pending() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-errs, singleton.ErrClosed)
	_, err := c.Request(t.Context(), nil)
	require.ErrorIs(t, err, singleton.ErrClosed)
	require.NoError(t, c.Close(), "Close is idempotent")
}

func TestNewClientValidates(t *testing.T) {
	r := newRig(t)
	nc := r.conn()
	for name, cfg := range map[string]singleton.ClientConfig{
		"no lease":         {},
		"bad lease":        {LeaseID: "a b"},
		"negative timeout": {LeaseID: "x", AttemptTimeout: -1},
		"bad overflow":     {LeaseID: "x", Overflow: 9},
	} {
		_, err := singleton.NewClient(nc, cfg)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
	}
	_, err := singleton.NewClient(nil, singleton.ClientConfig{LeaseID: "x"})
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

func TestServeOutsideATerm(t *testing.T) {
	r := newRig(t)
	err := singleton.Serve(t.Context(), r.conn(), singleton.ServeConfig{}, echo("x"))
	require.ErrorIs(t, err, singleton.ErrNoTerm)
}

// Dedupe applies a request once, however often it is sent: a re-send with
// the same ID gets the recorded reply.
func TestDedupe(t *testing.T) {
	var calls atomic.Int32
	h := singleton.Dedupe(singleton.NewMemIDStore(2), func(_ context.Context, req *singleton.Request) ([]byte, error) {
		n := calls.Add(1)
		return []byte(fmt.Sprint(n)), nil
	})
	call := func(id string) string {
		b, err := h(t.Context(), &singleton.Request{ID: id})
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "1", call("a"))
	assert.Equal(t, "1", call("a"), "the same ID: the recorded reply, no second call")
	assert.Equal(t, "2", call("b"))
	assert.Equal(t, "3", call("c")) // a is forgotten: the store keeps 2
	assert.Equal(t, "4", call("a"))
	assert.Equal(t, int32(4), calls.Load())
}

func TestKVIDStore(t *testing.T) {
	r := newRig(t)
	js, err := jetstream.New(r.conn())
	require.NoError(t, err)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "requests", TTL: time.Hour})
	require.NoError(t, err)
	s := singleton.NewKVIDStore(kv)
	_, ok, err := s.Get(t.Context(), "abc")
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, s.Put(t.Context(), "abc", []byte("first")))
	require.NoError(t, s.Put(t.Context(), "abc", []byte("second")), "a second Put keeps the first reply")
	got, ok, err := s.Get(t.Context(), "abc")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "first", string(got))
}

// counter is a workload actor that answers each request with the next
// number.
type counter struct{ n int }

func (a *counter) Receive(c actor.Context) {
	if req, ok := c.Message().(*singleton.Request); ok {
		a.n++
		c.Respond(singleton.Response{Data: []byte(fmt.Sprint(a.n, "@", req.Tenure.Token))})
	}
}

func TestPropsServesThroughTheWorkloadActor(t *testing.T) {
	r := newRig(t)
	nc := r.conn()
	lc := r.lc
	lc.OwnerID = "a"
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{Lease: lc, Store: r.mem,
		Workload: actors.WorkloadProps(singleton.Props(nc, singleton.ServeConfig{},
			actor.PropsFromProducer(func() actor.Actor { return &counter{} })))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	c := r.client(singleton.ClientConfig{})
	for i := 1; i <= 3; i++ {
		rep, err := c.Request(ctxFor(t, 5*time.Second), nil)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i, "@", rep.Tenure.Token), string(rep.Data))
	}
}

// A request a leader has taken is answered even when the leader steps down
// meanwhile: its handler's context ends only if the term is lost.
func TestRequestTakenBeforeAStepDownIsAnswered(t *testing.T) {
	r := newRig(t)
	started := make(chan struct{}, 1)
	a := r.start("a", func(ctx context.Context, req *singleton.Request) ([]byte, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
			return []byte("done"), nil
		}
	})
	token := a.leading(t)
	c := r.client(singleton.ClientConfig{})
	// A first request makes sure that the leader serves: its subscription
	// reaches the server a little after it leads, and a request sent before
	// is sent again (make test under load saw 2 attempts below).
	_, err := c.Request(ctxFor(t, 5*time.Second), nil)
	require.NoError(t, err)
	<-started
	type result struct {
		rep *singleton.Reply
		err error
	}
	res := make(chan result, 1)
	go func() {
		rep, err := c.Request(ctxFor(t, 5*time.Second), nil)
		res <- result{rep, err}
	}()
	<-started
	require.NoError(t, a.sup.Resign(ctxFor(t, 5*time.Second), time.Minute))
	got := <-res
	require.NoError(t, got.err)
	assert.Equal(t, "done", string(got.rep.Data))
	assert.Equal(t, token, got.rep.Tenure.Token, "answered by the term that took it")
	assert.Equal(t, 1, got.rep.Attempts)
}
