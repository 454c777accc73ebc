package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/singleton"
)

// The singleton scenarios: holders in singleton mode serve the lease's
// requests (package singleton) with a handler, de-duplicated by request ID
// in a KV bucket (singleton.Dedupe, singleton.NewKVIDStore), that applies
// each request with one write through the fence, carrying the request's
// tenure and ID. Callers in the test process send requests under load
// while the leader is killed, paused or resigns.

// idBucket is the KV bucket of request IDs the holders' handlers share.
const idBucket = "chaos_ids"

// Load and deadlines of the callers.
const (
	callers        = 3
	callEvery      = 10 * time.Millisecond
	callDeadline   = 4 * time.Second
	attemptTimeout = 500 * time.Millisecond
)

// createIDBucket creates the request-ID bucket, as its operator would.
func (e *env) createIDBucket() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_, err := e.jetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: idBucket, History: 1,
		TTL: 10 * time.Minute, Storage: jetstream.FileStorage})
	require.NoError(e.t, err)
}

// load is callers sending requests to the singleton until stopped.
type load struct {
	e      *env
	nc     *nats.Conn
	store  *natsstore.Store
	client *singleton.Client
	stop   chan struct{}
	wg     sync.WaitGroup
	live   map[*record.Request]bool // requests in flight
}

// startLoad starts n callers, each sending a request (deadline
// callDeadline), waiting for its answer, and pausing callEvery. Their
// client wakes on the lease's watch (a natsstore.Store of its own).
func (e *env) startLoad(n int) *load {
	e.t.Helper()
	l := &load{e: e, stop: make(chan struct{}), live: map[*record.Request]bool{}}
	var err error
	l.nc, err = nats.Connect(e.natsURL(), nats.Name("callers"), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	l.store, err = natsstore.NewConn(ctx, l.nc, natsstore.Config{Bucket: bucket, MaxTTL: e.ttl})
	require.NoError(e.t, err)
	l.client, err = singleton.NewClient(l.nc, singleton.ClientConfig{LeaseID: e.lease, Watcher: l.store,
		AttemptTimeout: attemptTimeout, RetryInterval: 200 * time.Millisecond})
	require.NoError(e.t, err)
	for i := range n {
		l.wg.Go(func() { l.call(fmt.Sprintf("caller-%d", i+1)) })
	}
	return l
}

func (l *load) call(name string) {
	for seq := 0; ; seq++ {
		select {
		case <-l.stop:
			return
		default:
		}
		q := &record.Request{Caller: name, Sent: record.Now(), Done: record.Never}
		q.Deadline = q.Sent + int64(callDeadline)
		l.e.mu.Lock()
		l.live[q] = true
		l.e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
		r, err := l.client.Request(ctx, fmt.Appendf(nil, "%s #%d", name, seq))
		done := record.Now()
		cancel()
		l.e.mu.Lock()
		delete(l.live, q)
		q.Done = done
		if err == nil {
			q.OK, q.ID, q.Token, q.Term, q.Attempts = true, r.ID, uint64(r.Tenure.Token), r.Tenure.Term, r.Attempts
		} else {
			q.Err = err.Error()
			q.NoLeader = errors.Is(err, singleton.ErrNoLeader) && errors.Is(err, context.DeadlineExceeded)
		}
		l.e.reqs = append(l.e.reqs, *q)
		l.e.mu.Unlock()
		time.Sleep(callEvery)
	}
}

// Stop stops sending and waits for the requests in flight (a request that
// does not return within its deadline and a little more is recorded as
// never returned), then closes the client, its store and its connection.
func (l *load) Stop() {
	close(l.stop)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(callDeadline + limit):
		l.e.mu.Lock()
		for q := range l.live {
			l.e.reqs = append(l.e.reqs, *q)
		}
		l.e.mu.Unlock()
		l.e.t.Errorf("%d requests never returned", len(l.live))
	}
	require.NoError(l.e.t, l.client.Close())
	require.NoError(l.e.t, l.store.Close())
	l.nc.Close()
}

// testSingleton runs rounds of fault against the leader of holders in
// singleton mode, under load.
func testSingleton(t *testing.T, name, desc string, n int, fault func(e *env, h *holder), causes ...string) {
	e := newEnv(t, name)
	// A leader that resigns holds off for half a round, so that a round
	// measures the handover to a standby, not the hold off of every other
	// candidate that resigned in the rounds before.
	e.extra = []string{"-mode", "singleton", "-resign-hold", (renew / 2).String()}
	e.createIDBucket()
	e.startN(candidates)
	l := e.startLoad(callers)
	var token uint64
	for range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(renew + jitter(renew))
		fault(e, h)
		if h.proc.Exited() {
			e.start()
		}
	}
	e.leader(token)
	time.Sleep(e.ttl) // the last leader serves for a while
	l.Stop()
	e.finish(desc, n, "", causes...)
}

func TestSingletonKill(t *testing.T) {
	testSingleton(t, "singleton-kill", "singleton requests under load (3 callers): SIGKILL of the leader", rounds(2, 20),
		func(e *env, h *holder) { e.kill(h, "serving") }, string(record.MarkKill))
}

func TestSingletonPause(t *testing.T) {
	fullOnly(t)
	testSingleton(t, "singleton-pause", "singleton requests under load (3 callers): SIGSTOP of the leader for 3 s",
		rounds(2, 10), func(e *env, h *holder) { e.pause(h, 3*e.ttl) }, string(record.MarkStop))
}

func TestSingletonGraceful(t *testing.T) {
	testSingleton(t, "singleton-graceful", "singleton requests under load (3 callers): the leader resigns",
		rounds(3, 60), func(e *env, h *holder) { e.resign(h) }, "release")
}
