package leasehold

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/lease"
)

// This file holds a rig that runs one Watchdog against a store whose every
// answer the test scripts, and whose timer callbacks the test can hold
// back, in virtual time. The store is also a model of the server: it
// records which writes landed, when and with which TTL, so that a test can
// compare what the Hold claims with what the server would do.

// errNoAnswer is what the scripted store returns for a renewal whose
// outcome is unknown (a timeout, a lost answer): it may or may not have
// landed.
var errNoAnswer = fmt.Errorf("%w: no answer in time: %w", lease.ErrUnavailable, context.DeadlineExceeded)

// outcome is how the scripted store answers a renewal.
type outcome string

const (
	answerOK        outcome = "ok"                    // landed, answered
	answerLanded    outcome = "landed, answer lost"   // landed, unknown to the owner
	answerNotLanded outcome = "not landed, no answer" // did not land (yet), unknown to the owner
	answerRefused   outcome = "refused (ErrInvalid)"  // nothing written, and the store says so
)

var outcomes = []outcome{answerOK, answerLanded, answerNotLanded, answerRefused}

// serverWrite is a write the model server holds: received at recv (never
// before it was sent), it expires at recv + ttl.
type serverWrite struct {
	rev  uint64
	recv time.Time
	ttl  time.Duration
}

func (w serverWrite) expires() time.Time { return w.recv.Add(w.ttl) }

// renewCall is one call of Renew.
type renewCall struct {
	l        lease.Lease // what was sent: l.Revision is the expected revision
	sent     time.Time
	deadline time.Time // the Hold's renew deadline when it was sent
	answer   chan renewAnswer
	answered outcome // "" until answered
	landed   bool
}

type renewAnswer struct {
	l   lease.Lease
	err error
}

// scriptStore is a lease.Store with one key and one writer, the watchdog
// under test. Renew waits, whatever its context says, until the test
// answers it. The model server behind it keeps the last write that
// landed; a write lands only while the key has not expired, and a late
// landing only with a compare-and-swap on the revision it was sent with.
// Every landing is received as early as it can be (at its send time, or
// at the previous landing if that was later): the worst case for the
// owner, whose validity must end before the server's expiry.
type scriptStore struct {
	mu      sync.Mutex
	calls   []*renewCall
	pending *renewCall
	last    serverWrite
	rev     uint64
	arrived chan struct{} // a call arrived; buffered, coalescing
	// deadline returns the owner's renew deadline, recorded with each call.
	deadline func() time.Time
}

var _ lease.Store = (*scriptStore)(nil)

func newScriptStore(l lease.Lease, acquired time.Time) *scriptStore {
	return &scriptStore{
		last:    serverWrite{rev: l.Revision, recv: acquired, ttl: l.TTL},
		rev:     l.Revision,
		arrived: make(chan struct{}, 1),
	}
}

func (s *scriptStore) Acquire(context.Context, lease.Claim) (lease.Acquisition, error) {
	return lease.Acquisition{}, errors.New("scriptStore: Acquire is not scripted")
}

func (s *scriptStore) Release(context.Context, lease.Lease) error {
	return errors.New("scriptStore: Release is not scripted")
}

// Renew records the call and waits for the test's answer.
func (s *scriptStore) Renew(_ context.Context, l lease.Lease) (lease.Lease, error) {
	c := &renewCall{l: l, sent: time.Now(), answer: make(chan renewAnswer, 1)}
	if s.deadline != nil {
		c.deadline = s.deadline()
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.pending = c
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	a := <-c.answer
	return a.l, a.err
}

// inFlight returns the call waiting for an answer, or nil.
func (s *scriptStore) inFlight() *renewCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// land makes c's write the server's last one, received at recv, if the key
// is still alive then.
func (s *scriptStore) land(c *renewCall, recv time.Time) bool {
	if !recv.Before(s.last.expires()) {
		return false
	}
	s.rev++
	s.last = serverWrite{rev: s.rev, recv: recv, ttl: c.l.TTL}
	c.landed = true
	return true
}

// answer answers the call in flight. An answer of ok for a key that has
// expired at the server is ErrLost instead, as a real store's
// compare-and-swap would say. It returns what was answered.
func (s *scriptStore) answer(o outcome) (outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pending
	if c == nil {
		return "", errors.New("no renewal in flight")
	}
	s.pending = nil
	recv := c.sent
	if recv.Before(s.last.recv) {
		recv = s.last.recv
	}
	var a renewAnswer
	switch o {
	case answerOK:
		if !s.land(c, recv) {
			o, a = "lost (the key had expired)", renewAnswer{l: c.l, err: fmt.Errorf("%w: the key expired", lease.ErrLost)}
			break
		}
		a.l = c.l
		a.l.Revision = s.rev
	case answerLanded:
		s.land(c, recv)
		a = renewAnswer{l: c.l, err: errNoAnswer}
	case answerNotLanded:
		a = renewAnswer{l: c.l, err: errNoAnswer}
	case answerRefused:
		a = renewAnswer{l: c.l, err: fmt.Errorf("%w: refused by the store", lease.ErrInvalid)}
	default:
		return "", fmt.Errorf("unknown outcome %q", o)
	}
	c.answered = o
	c.answer <- a
	return o, nil
}

// lateCandidates returns the answered calls whose write has not landed and
// still could, now: their outcome was unknown and the key is still at the
// revision they were sent with.
func (s *scriptStore) lateCandidates() []*renewCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*renewCall
	now := time.Now()
	for _, c := range s.calls {
		if c.answered == answerNotLanded && !c.landed && c.l.Revision == s.last.rev && now.Before(s.last.expires()) {
			out = append(out, c)
		}
	}
	return out
}

// landLate lands c's write now (a request replayed after a reconnect).
func (s *scriptStore) landLate(c *renewCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.land(c, time.Now())
}

// lastWrite returns the write the server holds last.
func (s *scriptStore) lastWrite() serverWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// timerHold makes the watchdog's timers (watchdogSpec.afterFunc) and can
// hold their callbacks back, as a busy scheduler may start a timer's
// goroutine late: the test runs a held callback when it chooses.
type timerHold struct {
	mu       sync.Mutex
	holdNext bool // hold the next callback that fires
	holdAll  bool // hold every callback (a paused process)
	held     []func()
	fired    chan struct{} // a callback was called or held; buffered, coalescing
}

func newTimerHold() *timerHold { return &timerHold{fired: make(chan struct{}, 1)} }

func (h *timerHold) afterFunc(d time.Duration, f func()) *time.Timer {
	return time.AfterFunc(d, func() {
		h.mu.Lock()
		hold := h.holdNext || h.holdAll
		if hold {
			h.holdNext = false
			h.held = append(h.held, f)
		}
		h.mu.Unlock()
		if !hold {
			f()
		}
		select {
		case h.fired <- struct{}{}:
		default:
		}
	})
}

func (h *timerHold) setHold(next, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holdNext, h.holdAll = next, all
}

// heldCount returns how many callbacks are held.
func (h *timerHold) heldCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// take removes and returns the i-th held callback.
func (h *timerHold) take(i int) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.held[i]
	h.held = append(h.held[:i], h.held[i+1:]...)
	return f
}

// fataler is what the rig needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// scriptRig runs one Watchdog over a scriptStore under a parent actor that
// collects its Poison messages. It must be made inside a synctest bubble.
type scriptRig struct {
	t       fataler
	cfg     lease.Config
	start   time.Time
	sys     *actorsys.System
	store   *scriptStore
	timers  *timerHold
	hold    *Hold
	parent  *actor.PID
	dog     *actor.PID
	poison  chan Poison
	replies chan ExtendResult
	stopped bool
	ended   bool // the Hold had ended at the last checkSafe
}

// newScriptRig acquires (in the model) a lease with cfg's TTL now, and
// starts its Watchdog, whose jitter is drawn from a source seeded with
// seed, so that a run can be repeated exactly.
func newScriptRig(t fataler, cfg lease.Config, seed uint64) *scriptRig {
	t.Helper()
	if cfg.LeaseID == "" {
		cfg.LeaseID = "test.script"
	}
	if cfg.OwnerID == "" {
		cfg.OwnerID = "owner-a"
	}
	start := time.Now()
	l := lease.Lease{ID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: "t", Token: 1, TTL: cfg.EffectiveTTL(), Revision: 1}
	hold, err := NewHold(cfg, l, sentAt(start))
	if err != nil {
		t.Fatalf("NewHold: %v", err)
	}
	r := &scriptRig{
		t: t, cfg: cfg, start: start, sys: actorsys.New(nil),
		store: newScriptStore(l, start), timers: newTimerHold(), hold: hold,
		poison: make(chan Poison, 16), replies: make(chan ExtendResult, 256),
	}
	r.store.deadline = hold.RenewDeadline
	spec := &watchdogSpec{store: r.store, hold: hold, interval: cfg.RenewInterval, log: actorsys.Logger(nil),
		hooks: &watchdogHooks{afterFunc: r.timers.afterFunc, rand: rand.New(rand.NewPCG(seed, 0))}}
	dogs := make(chan *actor.PID, 1)
	r.parent = r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			dogs <- c.Spawn(spec.props())
		case Poison:
			select {
			case r.poison <- m:
			default:
			}
		}
	}))
	r.dog = <-dogs
	r.settle()
	return r
}

// at returns how long after the acquisition t is, for messages.
func (r *scriptRig) at(t time.Time) time.Duration { return t.Sub(r.start) }

// settle waits until every goroutine of the bubble is blocked, and forgets
// the wake-ups that happened meanwhile.
func (r *scriptRig) settle() {
	synctest.Wait()
	select {
	case <-r.store.arrived:
	default:
	}
	select {
	case <-r.timers.fired:
	default:
	}
}

// advance lets virtual time pass for at most d, and stops early, at that
// instant, when a renewal reaches the store or a watchdog timer fires. It
// returns how much time passed.
func (r *scriptRig) advance(d time.Duration) time.Duration {
	from := time.Now()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-r.store.arrived:
	case <-r.timers.fired:
	}
	t.Stop()
	r.settle()
	return time.Since(from)
}

// advanceHolding is advance with the callback of the timer that fires, if
// one does, held back.
func (r *scriptRig) advanceHolding(d time.Duration) time.Duration {
	r.timers.setHold(true, false)
	passed := r.advance(d)
	r.timers.setHold(false, false)
	return passed
}

// untilCall advances until a renewal is in flight, at most limit.
func (r *scriptRig) untilCall(limit time.Duration) *renewCall {
	r.t.Helper()
	end := time.Now().Add(limit)
	for r.store.inFlight() == nil {
		if !time.Now().Before(end) {
			r.t.Fatalf("no renewal within %v", limit)
		}
		r.advance(time.Until(end))
	}
	return r.store.inFlight()
}

// answer answers the renewal in flight and lets the watchdog handle it.
func (r *scriptRig) answer(o outcome) outcome {
	r.t.Helper()
	got, err := r.store.answer(o)
	if err != nil {
		r.t.Fatalf("answer %q: %v", o, err)
	}
	r.settle()
	return got
}

// extend sends an Extend without waiting for its answer.
func (r *scriptRig) extend(ttl time.Duration) {
	r.sys.Root.Send(r.dog, Extend{TTL: ttl, Reply: r.replies})
	r.settle()
}

// release runs the i-th held timer callback.
func (r *scriptRig) release(i int) {
	r.timers.take(i)()
	r.settle()
}

// bound is the end of the validity that the write the server holds last
// allows: its receive time + its TTL - the SafetyMargin for that TTL.
// Before it, the server has not expired the write even with the owner's
// clock running as slow as the margin allows.
func (r *scriptRig) bound() (time.Time, serverWrite) {
	w := r.store.lastWrite()
	c := r.cfg
	c.TTL = w.ttl
	return w.recv.Add(w.ttl - c.EffectiveSafetyMargin()), w
}

// checkSafe fails when the Hold claims more than the server grants: a
// token that succeeds now although the server's last write is past its
// bound, or (which makes that hold for every instant until the Hold next
// changes) a held lease whose ValidUntil is past the bound. It also fails
// when the Hold has just been poisoned for a renewal that overran its
// deadline, and no renewal in flight has reached its deadline.
func (r *scriptRig) checkSafe() {
	r.t.Helper()
	now := time.Now()
	if err := r.hold.Err(); err != nil && !r.ended {
		r.ended = true
		c := r.store.inFlight()
		switch {
		case !errors.Is(err, ErrRenewOverran):
		case c == nil:
			r.t.Fatalf("at %v the Hold ended with %v, but no renewal is in flight", r.at(now), err)
		case now.Before(c.deadline):
			r.t.Fatalf("at %v the Hold ended with %v, but the renewal in flight since %v has until %v",
				r.at(now), err, r.at(c.sent), r.at(c.deadline))
		}
	}
	bound, w := r.bound()
	if _, err := r.hold.Token(); err == nil && !now.Before(bound) {
		r.t.Fatalf("Token succeeds at %v, but the server's last write (received at %v, TTL %v) is valid only until %v",
			r.at(now), r.at(w.recv), w.ttl, r.at(bound))
	}
	if r.hold.Err() == nil && r.hold.ValidUntil().After(bound) {
		r.t.Fatalf("at %v the Hold is valid until %v, but the server's last write (received at %v, TTL %v) is valid only until %v",
			r.at(now), r.at(r.hold.ValidUntil()), r.at(w.recv), w.ttl, r.at(bound))
	}
}

// checkHealthy fails when a lease whose renewals all succeeded promptly is
// not held: poisoned, or its token refused.
func (r *scriptRig) checkHealthy() {
	r.t.Helper()
	select {
	case p := <-r.poison:
		r.t.Fatalf("at %v, renewals all succeeded promptly, yet the watchdog sent Poison: %v", r.at(time.Now()), p.Err)
	default:
	}
	if _, err := r.hold.Token(); err != nil {
		r.t.Fatalf("at %v, renewals all succeeded promptly, yet Token fails: %v", r.at(time.Now()), err)
	}
}

// stop releases the Hold and stops the watchdog, as a lock's Release does.
func (r *scriptRig) stop() {
	r.hold.MarkReleased()
	r.sys.Root.Stop(r.dog)
	r.stopped = true
	r.settle()
}

// close ends the rig inside the bubble: no callback is held any more, the
// renewal in flight is answered, the actors stop.
func (r *scriptRig) close() {
	r.hold.MarkReleased()
	r.timers.setHold(false, false)
	for r.timers.heldCount() > 0 {
		r.release(0)
	}
	for r.store.inFlight() != nil {
		r.answer(answerNotLanded)
	}
	_ = r.sys.Root.StopFuture(r.parent).Wait()
	time.Sleep(2 * time.Second) // let protoactor's dead-letter throttle end inside the bubble
	r.sys.Shutdown()
}
