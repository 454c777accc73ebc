package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
)

// WatchdogProps returns the Props of a Watchdog that keeps the lease of hold
// alive in store. It renews every lease.RenewPeriod(cfg.RenewInterval, TTL)
// and moves the Hold's validity after each success. Transient failures are
// retried until the Hold's renew deadline; then, or at once when the store
// says the lease is lost or gives an answer retrying cannot fix, it poisons
// the Hold and sends Poison to its parent (lease.LossDeadline, LossTaken,
// LossStoreError). An Extend message renews at once with a new TTL; one the
// store refuses as invalid keeps the old TTL. report, when not nil, gets
// Renewed, RenewalFailed and Poisoned on the Watchdog's goroutine; logger
// may be nil. Stop the actor once the Hold has ended.
func WatchdogProps(store lease.Store, hold *Hold, cfg lease.Config, logger *slog.Logger, report func(Report)) *actor.Props {
	return PacedWatchdogProps(store, hold, cfg, logger, report, nil)
}

// PacedWatchdogProps is WatchdogProps for one of many watchdogs that share
// pacer, which spreads the first renewals of those started in a burst
// (see Pacer); nil means none.
func PacedWatchdogProps(store lease.Store, hold *Hold, cfg lease.Config, logger *slog.Logger, report func(Report),
	pacer *Pacer,
) *actor.Props {
	spec := &watchdogSpec{store: store, hold: hold, interval: cfg.RenewInterval, log: actorsys.Logger(logger),
		onReport: report, pacer: pacer}
	return spec.props()
}

// watchdogMailbox is the mailbox of every watchdog.
var watchdogMailbox = actor.UnboundedLockfree()

// watchdogSpec is what a Watchdog is made of, shared by its Props and every
// incarnation of the actor.
//
// The schedule: the period is re-derived after every renewal from the
// Hold's current TTL, so it never sleeps past half the TTL. The period after
// a renewal sent late (the process was busy: more than a 500th of the
// period, at least 1 ms, after it was due) is shortened by a random fraction
// of up to a fifth, never lengthened: renewals that came due in a burst and
// were delayed together then come due spread out, instead of bunched period
// after period. Renewals on time keep the exact period. A failed renewal is
// retried with short, jittered, capped backoff. The Watchdog never panics
// for a store error.
//
// Its resources: one tick timer, cancelled when it stops or restarts, and a
// second timer armed at the renew deadline while a renewal is in flight; no
// goroutine of its own: a renewal runs on the goroutine of the tick timer's
// callback, which runs the actor's mailbox (tickDispatcher), or on a mailbox
// goroutine for messages sent by others. The mailbox is protoactor's
// lock-free unbounded one, smaller than the default; a watchdog gets a
// message per renew period, so the default's throughput buys nothing.
type watchdogSpec struct {
	store    lease.Store
	hold     *Hold
	interval time.Duration // as configured; 0 means derived from the TTL
	log      *slog.Logger
	onReport func(Report)
	hooks    *watchdogHooks // nil but in tests
	dispatch tickDispatcher // the mailbox's, one per watchdog
	pacer    *Pacer         // shared with the watchdogs started beside it; may be nil
}

// watchdogHooks lets a test take over what makes a watchdog's schedule
// depend on more than the clock: its timers, whose callbacks a busy
// scheduler may start late, and its random jitter.
type watchdogHooks struct {
	afterFunc func(time.Duration, func()) *time.Timer // nil means time.AfterFunc
	rand      *rand.Rand                              // nil means the global source
}

// after starts a timer that calls f after d.
func (s *watchdogSpec) after(d time.Duration, f func()) *time.Timer {
	if s.hooks != nil && s.hooks.afterFunc != nil {
		return s.hooks.afterFunc(d, f)
	}
	return time.AfterFunc(d, f)
}

// rand returns the source of the watchdog's jitter; nil means the global one.
func (s *watchdogSpec) rand() *rand.Rand {
	if s.hooks == nil {
		return nil
	}
	return s.hooks.rand
}

func (s *watchdogSpec) watchdog() *watchdog { return &watchdog{watchdogSpec: s} }

// props returns the Props of the Watchdog s describes.
func (s *watchdogSpec) props() *actor.Props {
	return actor.PropsFromProducerWithActorSystem(func(*actor.ActorSystem) actor.Actor { return s.watchdog() },
		actor.WithMailbox(watchdogMailbox), actor.WithDispatcher(&s.dispatch))
}

// tickDispatcher is a watchdog's mailbox dispatcher. protoactor's default
// one starts a goroutine whenever an idle mailbox gets a message, and a
// timer's callback runs on a goroutine of its own: two new goroutines per
// renewal, the second one growing its stack through the store call (most
// of a renewal's CPU, in runtime.newstack and stackpoolalloc). Instead,
// the tick timer's callback claims the dispatch of the tick it sends
// (arm), and then runs the mailbox itself: one goroutine per renewal.
// Whatever else schedules the mailbox gets a goroutine of its own, as with
// the default dispatcher.
type tickDispatcher struct {
	// slot is nil, tickArmed while the tick's callback sends, or the
	// mailbox's run function that was scheduled meanwhile, for the
	// callback to run.
	slot atomic.Pointer[func()]
}

// tickArmed marks a tickDispatcher's slot as claimed by the tick callback.
var tickArmed = new(func())

// dispatchThroughput is how many messages a mailbox handles before it
// yields, as protoactor's default.
const dispatchThroughput = 300

// Schedule implements actor.Dispatcher: while the tick callback sends, it
// leaves fn to that callback; otherwise it starts a goroutine.
func (d *tickDispatcher) Schedule(fn func()) {
	if d.slot.CompareAndSwap(tickArmed, &fn) {
		return
	}
	go fn()
}

// Throughput implements actor.Dispatcher.
func (d *tickDispatcher) Throughput() int { return dispatchThroughput }

// arm claims the next Schedule, until take.
func (d *tickDispatcher) arm() { d.slot.Store(tickArmed) }

// take ends the claim and returns the mailbox's run function if one was
// scheduled meanwhile (by the callback's send or by any other), for the
// caller to run; nil otherwise.
func (d *tickDispatcher) take() func() {
	if p := d.slot.Swap(nil); p != nil && p != tickArmed {
		return *p
	}
	return nil
}

// watchdog is the Watchdog actor. It is kept small: a process may run one
// per held lock.
type watchdog struct {
	*watchdogSpec

	self   *actor.PID
	system *actor.ActorSystem
	timer  *time.Timer // the tick timer
	due    time.Time   // when the tick timer fires; zero when disarmed
	retry  backoff.Backoff
	fails  int
	last   error    // the last transient renewal error
	call   callGate // the store call in flight, and its deadline timer

	done bool // no more renewals: the Hold ended
	// jitter: the renewal was sent late; the period after it, if it
	// succeeds, is shortened at random.
	jitter bool
}

// callGate is what a watchdog shares with its timers' callbacks: once the
// actor is stopping, a tick callback already under way must not send it a
// tick, which would go to dead letters. While a renewal is in flight, the
// deadline timer is armed at its renew deadline, and firing poisons the
// Hold at once, whatever the store call is doing (overran).
//
// mu guards epoch, deadline, stopped and overran. epoch tells the deadline
// timer's callback whether a call is in flight: it is incremented when a
// call starts (odd: in flight) and when it returns (even); deadline is the
// in-flight call's, so that the callback of an earlier call, started too
// late to be stopped, does nothing to a later call before its own deadline.
type callGate struct {
	timer    *time.Timer // the deadline timer; only the actor touches it
	mu       sync.Mutex
	epoch    uint32
	stopped  bool
	overran  bool
	deadline time.Time
}

// renewTick wakes the watchdog; stale ticks are recognised by w.due.
type renewTick struct{}

// watchdogSync is answered (by closing done) once the messages before it,
// a renewal in flight included, have been handled.
type watchdogSync struct{ done chan struct{} }

// Quiesce waits at most timeout until the watchdog at pid has finished what
// it was doing; with its Hold ended, it then starts nothing new.
func Quiesce(c actor.Context, pid *actor.PID, timeout time.Duration) bool {
	done := make(chan struct{})
	c.Send(pid, watchdogSync{done: done})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Receive implements actor.Actor.
func (w *watchdog) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		w.self, w.system = c.Self(), c.ActorSystem()
		_, _, sent, err := w.hold.renewArgs()
		if err != nil {
			w.done = true
			return
		}
		w.arm(w.pacer.slot(sent.At.Add(w.firstPeriod()), w.period()))
	case renewTick:
		now := time.Now()
		if w.due.IsZero() || now.Before(w.due) {
			return // stale: the timer was re-armed or disarmed since
		}
		period := w.period()
		w.jitter = now.Sub(w.due) > lateBy(period)
		w.due = time.Time{}
		w.renew(c, false)
	case Extend:
		w.extend(c, msg)
	case watchdogSync:
		close(msg.done)
	case *actor.Stopping, *actor.Restarting:
		w.call.mu.Lock()
		w.call.stopped = true
		w.call.mu.Unlock()
		w.disarm()
	}
}

// firstPeriod is the sleep before the first renewal: the period, or,
// for a watchdog its Pacer finds started in a burst, the period shortened
// at random by up to nine tenths (spreadFirst).
func (w *watchdog) firstPeriod() time.Duration {
	period := w.period()
	if w.pacer != nil && w.pacer.burst(time.Now()) {
		return spreadFirst(w.rand(), period)
	}
	return period
}

// period is the sleep between renewals for the Hold's current TTL.
func (w *watchdog) period() time.Duration { return renewPeriod(w.interval, w.hold.TTL()) }

// renewPeriod is lease.RenewPeriod of the configured interval normalised
// for ttl (0 means max(ttl/3, 1 s), >= ttl means max(ttl/2, 1 s)):
// never more than half the TTL, at least 1 ms.
func renewPeriod(interval, ttl time.Duration) time.Duration {
	c := lease.Config{TTL: ttl, RenewInterval: interval}
	return lease.RenewPeriod(c.EffectiveRenewInterval(), ttl)
}

// jittered returns period shortened by a uniformly random fraction of up
// to a fifth: in [0.8, 1.0] x period, never longer, so that the watchdog
// still never sleeps past half the TTL.
func jittered(period time.Duration) time.Duration { return jitteredBy(nil, period) }

// jitteredBy is jittered with the random source r (nil: the global one).
func jitteredBy(r *rand.Rand, period time.Duration) time.Duration {
	if r == nil {
		return period - rand.N(period/5+1)
	}
	return period - time.Duration(r.Int64N(int64(period/5+1)))
}

// lateBy is how late a tick must be handled for the renewal to count as
// late, so that the period after it is jittered: a 500th of the period
// (10 ms for 5 s), at least 1 ms. A watchdog that is not held up handles
// its tick well within that.
func lateBy(period time.Duration) time.Duration { return max(period/500, time.Millisecond) }

// arm (re)schedules the tick timer to fire at due, at once if due has
// passed; how late the tick is handled is measured from due.
func (w *watchdog) arm(due time.Time) {
	w.due = due
	d := max(time.Until(due), 0)
	if w.timer == nil {
		w.timer = w.after(d, w.fire)
		return
	}
	w.timer.Reset(d)
}

// fire is the tick timer's callback. It only ever sends a tick, which
// Receive ignores when stale (w.due), and nothing once the actor is
// stopping: the tick would be a dead letter.
//
// Without test hooks on the timers, it then runs the mailbox on its own
// goroutine (tickDispatcher), after unlocking: the tick's renewal takes mu.
func (w *watchdog) fire() {
	inline := w.hooks == nil || w.hooks.afterFunc == nil // a test's timers may call back from its own goroutine
	w.call.mu.Lock()
	if w.call.stopped {
		w.call.mu.Unlock()
		return
	}
	if inline {
		w.dispatch.arm()
	}
	w.system.Root.Send(w.self, renewTick{})
	var run func()
	if inline {
		run = w.dispatch.take()
	}
	w.call.mu.Unlock()
	if run != nil {
		growStack()
		run()
	}
}

// renewStack is about what a renewal uses of its goroutine's stack, through
// protoactor's mailbox and the store call (more with NATS).
const renewStack = 5 << 10

// growStack makes the calling goroutine's stack big enough for a renewal
// in one step, while the stack is still shallow: a goroutine starts with a
// small stack, and growing it from deep in a renewal copied and adjusted
// every frame, twice (runtime.copystack, a quarter of a renewal's CPU).
//
//go:noinline
func growStack() {
	var frame [renewStack]byte
	stackSink(frame[:])
}

// stackSink keeps growStack's frame from being optimised away.
//
//go:noinline
func stackSink([]byte) {}

// overrun is the callback of the deadline timer: the renew deadline of a
// store call passed with the call still in flight. It ends the Hold now,
// so that token reads fail and the workload's context is cancelled before
// the validity ends; Poison also aborts the call, and the watchdog tells
// its parent when the call returns. A callback of a call that has returned
// (it fired as the call returned, and started too late to be stopped) does
// nothing: no call is in flight, or the one in flight has a later deadline.
func (w *watchdog) overrun() {
	g := &w.call
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch%2 == 1 && !time.Now().Before(g.deadline) { // a call in flight is past its deadline
		g.overran = w.hold.Poison(lease.LossDeadline, ErrRenewOverran)
	}
}

// callStore runs one store renewal with a timer of its own armed at
// deadline, so that the Hold is poisoned at the deadline even if the store
// does not return in time. It reports whether that happened. The tick
// timer is disarmed meanwhile: a tick already under way is stale.
func (w *watchdog) callStore(ctx context.Context, l lease.Lease, deadline time.Time) (renewed lease.Lease, overran bool, err error) {
	w.disarm()
	g := &w.call
	g.mu.Lock()
	g.epoch++ // odd: in flight
	g.deadline = deadline
	g.overran = false
	g.mu.Unlock()
	if d := max(time.Until(deadline), 0); g.timer == nil {
		g.timer = w.after(d, w.overrun)
	} else {
		g.timer.Reset(d)
	}
	renewed, err = w.store.Renew(ctx, l)
	g.timer.Stop()
	g.mu.Lock()
	overran = g.overran
	g.epoch++ // even: returned
	g.overran = false
	g.mu.Unlock()
	return renewed, overran, err
}

func (w *watchdog) disarm() {
	w.due = time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// deadlineCause says why the renew deadline passed before a renewal could
// be sent: the last renewal's error, or none, and a suspension of the
// machine since the last successful write, which nothing else would tell an
// operator.
func (w *watchdog) deadlineCause() error {
	cause := w.last
	if cause == nil {
		cause = ErrRenewDeadline
	}
	if d := w.hold.suspended(); d > 0 {
		cause = fmt.Errorf("%w (the machine was suspended for %v since the last renewal was sent)", cause,
			d.Round(time.Millisecond))
	}
	return cause
}

// renew sends one renewal and decides what happens next. It returns the
// renewal's error. For an Extend (extending), an answer that the request is
// invalid is returned without poisoning or re-arming: the caller restores
// the previous TTL and schedule.
func (w *watchdog) renew(c actor.Context, extending bool) error {
	// 1. What to send, unless the Hold ended or its renew deadline passed.
	if w.done {
		return w.hold.Err()
	}
	l, deadline, _, err := w.hold.renewArgs()
	if err != nil {
		w.done = true
		return err
	}
	sent := Now()
	if !sent.At.Before(deadline) {
		w.poison(c, l, lease.LossDeadline, w.deadlineCause())
		return w.hold.Err()
	}
	// 2. The write may land whatever the answer says: the Hold's validity
	// and renew deadline are lowered to its own, if earlier, before it is
	// sent (a shorter TTL).
	period := renewPeriod(w.interval, l.TTL)
	deadline, before := w.hold.sending(l.TTL, sent)
	// 3. Send it.
	renewed, overran, err := w.send(l, sent, period, deadline)
	// 4. Next: stop, or schedule the next renewal or the retry.
	switch {
	case w.done: // the Hold ended before the call began
		return err
	case overran:
		w.done = true
		w.disarm()
		w.report(c, l, lease.LossDeadline, ErrRenewOverran)
		return w.hold.Err()
	case err == nil:
		w.succeeded(renewed, sent, period)
		return nil
	}
	return w.failed(c, failure{lease: l, err: err, deadline: deadline, period: period, extending: extending, before: before})
}

// send makes the store call of a renewal sent at sent. One attempt may
// take at most a period, and never past the deadline; the Hold's end
// aborts it (beginCall), and if the Hold ended before it began, send marks
// the watchdog done and returns the Hold's error.
func (w *watchdog) send(l lease.Lease, sent Sent, period time.Duration, deadline time.Time) (renewed lease.Lease, overran bool, err error) {
	attemptEnd := sent.At.Add(period)
	if deadline.Before(attemptEnd) {
		attemptEnd = deadline
	}
	callCtx, cancel := context.WithDeadline(context.Background(), attemptEnd)
	defer cancel()
	if err := w.hold.beginCall(cancel); err != nil {
		w.done = true
		return lease.Lease{}, false, err
	}
	renewed, overran, err = w.callStore(callCtx, l, deadline)
	if err == nil {
		// The revision is recorded before the call counts as over (even
		// when the Hold has ended or overran), so that a release that finds
		// no renewal in flight compares and swaps the final revision.
		w.hold.renewed(renewed, sent)
	}
	w.hold.endCall()
	return renewed, overran, err
}

// succeeded schedules the renewal after a successful one sent at sent.
func (w *watchdog) succeeded(renewed lease.Lease, sent Sent, period time.Duration) {
	w.fails, w.last = 0, nil
	w.retry.Reset()
	w.emit(Renewed{Lease: renewed, ValidUntil: w.hold.ValidUntil()})
	due := sent.At.Add(period)
	if w.jitter {
		due, w.jitter = sent.At.Add(jitteredBy(w.rand(), period)), false
	}
	w.arm(w.pacer.slot(due, period))
}

// failure is a renewal that failed: what was sent, its error, and what
// the decision after it needs.
type failure struct {
	lease     lease.Lease
	err       error
	deadline  time.Time // the renew deadline
	period    time.Duration
	extending bool
	before    validity // the Hold's state before the renewal was sent
}

// failed decides what a failed renewal leads to: nothing more if the Hold
// ended meanwhile, the previous TTL back for a refused Extend, a poisoned
// Hold for an answer retrying cannot fix or past the deadline, otherwise a
// retry after a short backoff. It returns the renewal's error (the Hold's
// once it ended).
func (w *watchdog) failed(c actor.Context, f failure) error {
	if w.hold.Err() != nil { // ended while the renewal was in flight: stop quietly
		w.done = true
		return w.hold.Err()
	}
	if f.extending && refused(f.err) {
		w.hold.restore(f.before) // nothing was written
		return f.err
	}
	if reason := classify(f.err); reason != lease.LossUnknown {
		w.poison(c, f.lease, reason, f.err)
		return w.hold.Err()
	}
	w.fails++
	w.last = f.err
	w.emit(RenewalFailed{Lease: f.lease, Attempt: w.fails, Deadline: f.deadline, Err: f.err})
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "lease renewal failed; retrying until the renew deadline",
		leaseAttrs(f.lease, slog.Int("attempt", w.fails), slog.Time("deadline", f.deadline), slog.Any("error", f.err))...)
	now := time.Now()
	if !now.Before(f.deadline) {
		w.poison(c, f.lease, lease.LossDeadline, f.err)
		return w.hold.Err()
	}
	if w.fails == 1 {
		w.retry.Policy, w.retry.Rand = retryPolicy(f.period), w.rand()
	}
	w.arm(now.Add(min(w.retry.Failed(now), f.deadline.Sub(now))))
	return f.err
}

// retryPolicy is the short backoff between failed renewals: from a tenth of
// the period (1 ms to 100 ms) up to half the period, full jitter.
func retryPolicy(period time.Duration) backoff.Policy {
	base := min(max(period/10, time.Millisecond), 100*time.Millisecond)
	return backoff.Policy{Base: base, Cap: max(period/2, base), Jitter: backoff.Full}
}

// poison ends the Hold and tells the parent.
func (w *watchdog) poison(c actor.Context, l lease.Lease, reason lease.LossReason, err error) {
	w.done = true
	w.disarm()
	if !w.hold.Poison(reason, err) {
		return // released (or poisoned) meanwhile: nothing to report
	}
	w.report(c, l, reason, err)
}

// report logs, emits and sends to the parent the poison of the Hold.
func (w *watchdog) report(c actor.Context, l lease.Lease, reason lease.LossReason, err error) {
	cause := w.hold.Err()
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "lease poisoned",
		leaseAttrs(l, slog.String("reason", reason.String()), slog.Any("error", err))...)
	w.emit(Poisoned{Lease: l, Reason: reason, Err: cause})
	if p := c.Parent(); p != nil {
		c.Send(p, Poison{LeaseID: l.ID, Token: l.Token, Reason: reason, Err: cause})
	}
}

// extend renews at once with a new TTL and answers.
func (w *watchdog) extend(c actor.Context, msg Extend) {
	var res ExtendResult
	switch {
	case w.done || w.hold.Err() != nil:
		res.Err = w.hold.Err()
	default:
		if err := w.hold.validateTTL(msg.TTL); err != nil {
			res.Err = err
			break
		}
		ttl, due := w.hold.TTL(), w.due
		w.hold.setTTL(msg.TTL)
		w.disarm()
		res.Err = w.renew(c, true)
		if res.Err != nil && refused(res.Err) && !w.done {
			// The store refused the TTL (below its floor, say): nothing
			// was written. Keep the lease as it was, with the previous
			// TTL, renewed when it was due.
			w.hold.setTTL(ttl)
			if due.IsZero() {
				due = time.Now()
			}
			w.arm(due)
		}
	}
	res.Lease, res.ValidUntil = w.hold.Lease(), w.hold.ValidUntil()
	switch {
	case msg.Reply != nil:
		select {
		case msg.Reply <- res:
		default: // an unbuffered or full channel: never block the watchdog
		}
	case c.Sender() != nil:
		c.Respond(res)
	}
}

// refused reports whether the store refused a renewal as invalid, without
// writing: for an Extend, that is a refused TTL.
func refused(err error) bool {
	return errors.Is(err, lease.ErrInvalid) && classify(err) == lease.LossStoreError
}

func (w *watchdog) emit(r Report) {
	if w.onReport != nil {
		w.onReport(r)
	}
}

// leaseAttrs returns the attributes every lease log record carries.
func leaseAttrs(l lease.Lease, more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("lease_id", l.ID), slog.String("owner_id", l.OwnerID), slog.Uint64("token", uint64(l.Token)),
	}, more...)
}
