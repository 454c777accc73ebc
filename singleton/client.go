package singleton

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/lease"
)

// Overflow says what a Client does with a request that finds MaxPending
// requests already waiting for a leader. The zero value is OverflowReject.
type Overflow uint8

const (
	// OverflowReject fails the new request at once with ErrBufferFull.
	OverflowReject Overflow = iota
	// OverflowDropOldest fails the request that has waited longest with
	// ErrBufferFull, and the new one waits in its place.
	OverflowDropOldest
)

// Defaults of ClientConfig.
const (
	DefaultAttemptTimeout = 2 * time.Second
	DefaultMaxPending     = 1000
	DefaultRetryInterval  = time.Second
)

// ClientConfig says how a Client reaches a lease's singleton. LeaseID is
// required; every other zero value works.
type ClientConfig struct {
	// LeaseID names the lease whose leader serves the requests.
	LeaseID string
	// Subject is where requests are sent; "" means Subject(LeaseID). It
	// must be the subject the leader serves.
	Subject string
	// Watcher, when not nil, watches the lease: a request waiting for a
	// leader is sent again as soon as a new term holds the lease, instead of
	// at its next retry. Pass the store the candidates use (a
	// natsstore.Store).
	Watcher lease.Watcher
	// AttemptTimeout bounds the wait for one reply before the request is
	// sent again (the leader may have crashed while handling it). It must
	// exceed the handler's own time. 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// RetryInterval is the longest pause between two sends of a request
	// while no leader answers; pauses grow from 1 ms up to it. 0 means
	// DefaultRetryInterval.
	RetryInterval time.Duration
	// MaxPending bounds the requests waiting for a leader at once (Akka's
	// singleton proxy buffers 1000). 0 means DefaultMaxPending.
	MaxPending int
	// Overflow says what happens to a request beyond MaxPending.
	Overflow Overflow
}

// Reply is a leader's answer.
type Reply struct {
	Data   []byte
	Header nats.Header
	// ID is the request's ID; Tenure the term that handled it; Attempts
	// how many times the request was sent.
	ID       string
	Tenure   lease.Tenure
	Attempts int
}

// Client sends requests to the leader of one lease. It is safe for
// concurrent use; Close it when done.
type Client struct {
	nc  *nats.Conn
	cfg ClientConfig

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, when a new term holds the lease
	pending []*waiter     // requests waiting for a leader, oldest first
	closed  bool

	stop context.CancelFunc
	done chan struct{} // closed when the watch goroutine has ended
}

// waiter is a request waiting for a leader.
type waiter struct{ dropped chan struct{} }

// NewClient returns a Client over nc. Errors match lease.ErrInvalid.
func NewClient(nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	if nc == nil {
		return nil, &lease.FieldError{Field: "nc", Reason: "must not be nil"}
	}
	if err := lease.ValidateLeaseID(cfg.LeaseID); err != nil {
		return nil, err
	}
	switch {
	case cfg.AttemptTimeout < 0, cfg.RetryInterval < 0, cfg.MaxPending < 0:
		return nil, &lease.FieldError{Field: "ClientConfig", Reason: "durations and MaxPending must not be negative"}
	case cfg.Overflow > OverflowDropOldest:
		return nil, &lease.FieldError{Field: "Overflow", Reason: fmt.Sprintf("unknown policy %d", cfg.Overflow)}
	}
	if cfg.Subject == "" {
		cfg.Subject = Subject(cfg.LeaseID)
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	c := &Client{nc: nc, cfg: cfg, changed: make(chan struct{}), done: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	if cfg.Watcher == nil {
		close(c.done)
		return c, nil
	}
	go c.watch(ctx)
	return c, nil
}

// Close fails the requests waiting for a leader with ErrClosed, stops the
// lease watch and waits for it. Later requests fail with ErrClosed. It is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.changed) // wakes every waiter, which then sees closed
	}
	c.mu.Unlock()
	c.stop()
	<-c.done
	return nil
}

// watch wakes waiting requests each time a new term holds the lease, until
// the Client closes. A watch that ends is opened again.
func (c *Client) watch(ctx context.Context) {
	defer close(c.done)
	pause := time.Millisecond
	for ctx.Err() == nil {
		ch, err := c.cfg.Watcher.Watch(ctx, c.cfg.LeaseID)
		if err == nil {
			pause = time.Millisecond
			for ev := range ch {
				if ev.Kind == lease.EventHeld {
					c.wake()
				}
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, c.cfg.RetryInterval)
	}
}

// wake tells the waiting requests that a new term holds the lease.
func (c *Client) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// Request sends data to the leader and returns its reply. While no leader
// answers (a handover, a crash, a term that is not valid any more) it
// waits, woken by the lease's watch, and sends again with the same request
// ID, until ctx ends: it then returns an error matching ErrNoLeader and
// ctx's error. A handler's error is a *HandlerError (not retried). A
// request that finds MaxPending requests waiting fails with ErrBufferFull,
// as Overflow says.
func (c *Client) Request(ctx context.Context, data []byte) (*Reply, error) {
	id := newRequestID()
	msg := &nats.Msg{Subject: c.cfg.Subject, Data: data, Header: nats.Header{HeaderRequestID: []string{id}}}
	var (
		w       *waiter
		lastErr error
		pause   = time.Millisecond
	)
	defer func() {
		if w != nil {
			c.leave(w)
		}
	}()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, c.gaveUp(ctx, id, lastErr)
		}
		changed, closed := c.state()
		if closed {
			return nil, ErrClosed
		}
		r, err := c.send(ctx, msg)
		if err == nil {
			switch Status(r.Header.Get(HeaderStatus)) {
			case StatusOK:
				return &Reply{Data: r.Data, Header: r.Header, ID: id, Tenure: tenureOf(r.Header), Attempts: attempt}, nil
			case StatusError:
				return nil, &HandlerError{Message: r.Header.Get(HeaderError), Tenure: tenureOf(r.Header)}
			case StatusNotLeading:
				err = errNotLeading
			default:
				return nil, fmt.Errorf("singleton: request %s: an answer that is not a singleton's (status %q)",
					id, r.Header.Get(HeaderStatus))
			}
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil, fmt.Errorf("singleton: request %s: %w", id, err)
		}
		if ctx.Err() == nil || lastErr == nil {
			// An attempt cut short by the request's own end says nothing of
			// the leader: the error before it does.
			lastErr = err
		}
		if w == nil {
			if w, err = c.enter(); err != nil {
				return nil, err
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-changed:
			pause = time.Millisecond // a new term: send again now
		case <-w.dropped:
			t.Stop()
			w = nil
			return nil, fmt.Errorf("singleton: request %s: %w (dropped for a newer request)", id, ErrBufferFull)
		case <-t.C:
			pause = min(2*pause, c.cfg.RetryInterval)
		}
		t.Stop()
	}
}

// errNotLeading is the error of an attempt answered StatusNotLeading.
var errNotLeading = errors.New("singleton: the term that answered is not valid any more")

// send makes one attempt, bounded by AttemptTimeout.
func (c *Client) send(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	return c.nc.RequestMsgWithContext(actx, msg)
}

// gaveUp is the error of a request whose context ended.
func (c *Client) gaveUp(ctx context.Context, id string, last error) error {
	if last == nil {
		return fmt.Errorf("singleton: request %s: %w: %w", id, ErrNoLeader, context.Cause(ctx))
	}
	return fmt.Errorf("singleton: request %s: %w: %w (last attempt: %v)", id, ErrNoLeader, context.Cause(ctx), last)
}

// state returns the channel closed at the next leader change, and whether
// the Client is closed.
func (c *Client) state() (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed, c.closed
}

// enter admits a request into the waiting buffer, or refuses it.
func (c *Client) enter() (*waiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) >= c.cfg.MaxPending {
		if c.cfg.Overflow == OverflowReject || len(c.pending) == 0 {
			return nil, fmt.Errorf("singleton: %w (%d)", ErrBufferFull, c.cfg.MaxPending)
		}
		oldest := c.pending[0]
		c.pending = c.pending[1:]
		close(oldest.dropped)
	}
	w := &waiter{dropped: make(chan struct{})}
	c.pending = append(c.pending, w)
	return w, nil
}

// leave removes a request from the waiting buffer.
func (c *Client) leave(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pending {
		if p == w {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return
		}
	}
}

// Pending returns how many requests wait for a leader.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
