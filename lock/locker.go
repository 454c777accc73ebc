package lock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// Locker hands out distributed locks kept as leases in a lease.Store. Each
// held lock has a Guard. A lock with a lease of its own has a watchdog
// actor (the one a LeaseSupervisor's term has) that renews it; locks held
// under the Locker's session (Config.Session) share the session's
// watchdog. The watchdogs are children of one keeper actor per Locker,
// which receives their Poison messages.
//
// A Locker is safe for concurrent use. Close it when done: it releases the
// locks still held and stops the watchdogs.
type Locker struct {
	store    lease.Store
	sessions lease.SessionStore // nil unless Config.Session
	watcher  lease.Watcher      // nil when the store cannot watch
	cfg      Config
	owner    string
	log      *slog.Logger
	metrics  *metrics
	held     heldCount   // locks held: with a live watchdog, or under a live session
	host     host        // the actor system and the keeper
	pending  pending     // locks whose watchdog has not started yet
	slot     sessionSlot // the session, with Config.Session
	queues   queues      // waiting Acquire calls, by resource
	life     lifecycle   // calls in progress, and Close
}

// New returns a Locker over store. If store is also a lease.Watcher,
// waiting Acquire calls are woken by its watch. It returns an error
// matching lease.ErrInvalid when cfg is invalid, or when cfg.Session is set
// and store is not a lease.SessionStore.
//
// New does not touch the store, and starts nothing: the watchdogs' actor
// system (the Locker's own when cfg.System is nil, which takes a few
// milliseconds of CPU to start) is started by the first lock that needs a
// watchdog, or by the session's. A lock released before its watchdog is
// due never needs one (see the package doc), so a short-lived Locker whose
// locks are all short starts no actor system at all. Give many Lockers one
// System to share its cost.
func New(store lease.Store, cfg Config) (*Locker, error) {
	if store == nil {
		return nil, &lease.FieldError{Field: "store", Reason: "must not be nil"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	l := &Locker{
		metrics: m,
		held:    heldCount{gauge: m.held},
		store:   store,
		cfg:     cfg,
		owner:   cfg.OwnerID,
		log:     actorsys.Logger(cfg.Logger),
		host:    host{done: make(chan struct{})},
		queues:  queues{m: make(map[string]*queue)},
	}
	l.life.init()
	if cfg.Session {
		ss, ok := store.(lease.SessionStore)
		if !ok {
			return nil, &lease.FieldError{Field: "Session",
				Reason: fmt.Sprintf("the store %T cannot hold leases under a session (it is not a lease.SessionStore)", store)}
		}
		l.sessions = ss
	}
	if l.owner == "" {
		l.owner = lease.NewOwnerID()
	}
	l.watcher, _ = store.(lease.Watcher)
	return l, nil
}

// OwnerID returns the owner ID this Locker writes in every lock it holds.
func (l *Locker) OwnerID() string { return l.owner }

// Held returns the number of locks held: with a running watchdog, or under
// a live session.
func (l *Locker) Held() int { return int(l.held.n.Load()) }

// Acquire blocks until it holds the lock on resource, ctx is done, or the
// Locker is closed. While another owner holds the lock it waits for the
// store's watch to show the lock free, and polls with backoff as well; the
// calls of one Locker for one resource queue up (see the package doc).
//
// Errors: ctx's error (with its cause), lease.ErrClosed after Close,
// lease.ErrInvalid for a bad resource or option, and store errors that
// waiting cannot fix (lease.ErrCorrupt); transient store errors are retried.
// A lock granted is returned even if ctx ends at that moment; if ctx ends
// right after an attempt whose outcome the store could not tell, the key
// may keep this call's owner ID until its TTL runs out, with no guard.
func (l *Locker) Acquire(ctx context.Context, resource string, opts ...Option) (*Guard, error) {
	return l.acquire(ctx, resource, opts, true)
}

// TryAcquire makes one attempt to take the lock on resource and does not
// wait: it returns a *HeldError (matching ErrHeld) when another owner holds
// it, and the store's error when the store failed.
func (l *Locker) TryAcquire(ctx context.Context, resource string, opts ...Option) (*Guard, error) {
	return l.acquire(ctx, resource, opts, false)
}

func (l *Locker) acquire(ctx context.Context, resource string, opts []Option, wait bool) (*Guard, error) {
	start := time.Now()
	g, err := l.take(ctx, resource, opts, wait)
	l.metrics.waited(start, err)
	return g, err
}

// take is acquire without its measurement.
func (l *Locker) take(ctx context.Context, resource string, opts []Option, wait bool) (*Guard, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttl < 0 || o.retry < 0 {
		return nil, &lease.FieldError{Field: "Option", Reason: "TTL and retry interval must not be negative"}
	}
	cfg := l.cfg.leaseConfig(l.cfg.Prefix+resource, l.owner, o.ttl, o.retry)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !l.life.begin() {
		return nil, lease.ErrClosed
	}
	defer l.life.end()
	c := &contender{l: l, ctx: ctx, cfg: cfg, resource: resource, term: lease.NewTerm(), // one tenure: every attempt
		under: l.sessions != nil && !o.own}
	if !wait {
		g, holder, err := c.attempt(false)
		switch {
		case g != nil:
			return g, nil
		case err != nil:
			return nil, fmt.Errorf("lock: acquire %s: %w", resource, err)
		}
		return nil, &HeldError{Resource: resource, Owner: holder.OwnerID, Term: holder.Term}
	}
	return c.wait()
}

// pollPolicy is the backoff of a waiting Acquire's polls: from an eighth of
// the retry interval (at least 1 ms) up to the retry interval, with equal
// jitter so that contenders spread out but do not poll in a burst.
func pollPolicy(retry time.Duration) backoff.Policy {
	base := max(retry/8, time.Millisecond)
	return backoff.Policy{Base: base, Cap: max(retry, base), Jitter: backoff.Equal, ResetAfter: time.Duration(1 << 62)}
}

// ctxError is the error of an Acquire whose context ended: it matches
// ctx.Err() and the context's cause.
func ctxError(ctx context.Context, resource string) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return fmt.Errorf("lock: acquire %s: %w", resource, err)
	}
	return fmt.Errorf("lock: acquire %s: %w: %w", resource, err, cause)
}

// acquired finishes an acquisition: it logs and reports it.
func (l *Locker) acquired(g *Guard, handover bool) {
	le := g.t.Lease()
	if l.debug() {
		l.log.Debug("lock: acquired", "lease_id", le.ID, "owner_id", le.OwnerID, "token", uint64(le.Token),
			"session", g.sessionID())
	}
	if l.cfg.OnEvent != nil {
		l.emit(LockAcquired{Subject: subject(le), Token: le.Token, ValidUntil: g.t.ValidUntil(), Handover: handover})
	}
}

// debug reports whether the logger takes debug records: the hot path
// builds none otherwise.
func (l *Locker) debug() bool { return l.log.Enabled(context.Background(), slog.LevelDebug) }

// giveBack releases a lease that will have no guard, bounded by its renew
// period.
func (l *Locker) giveBack(le lease.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), lease.RenewPeriod(time.Second, le.TTL))
	defer cancel()
	if err := l.store.Release(ctx, le); err != nil {
		l.log.Warn("lock: could not give back a lease; it expires at the store",
			"lease_id", le.ID, "token", uint64(le.Token), "error", err)
	}
}

// register counts g as held, and has its watchdog started after
// watchdogDelay (by the keeper, which handles its messages in order, so
// that a later Extend, release or Close finds the watchdog). It reports
// false when Close has started.
func (l *Locker) register(g *Guard, cfg lease.Config) bool {
	l.held.add(1) // before the keeper may count its end
	if !l.deferWatchdog(g, cfg) {
		l.unheld()
		return false
	}
	return true
}

// unheld counts a lock with a lease of its own that is no longer held.
func (l *Locker) unheld() { l.held.add(-1) }

// sendKeeper sends msg to the keeper unless Close has started, and reports
// whether it did; the first message starts the actor system and the
// keeper (host.up). Sending while Close cannot start (lifecycle.whileOpen)
// orders msg before Close's closeKeeper in the keeper's mailbox, so the
// keeper handles it before it stops, and nothing is sent to a stopped
// keeper.
func (l *Locker) sendKeeper(msg any) bool {
	if !l.hostUp() {
		return false // Close has started
	}
	return l.life.whileOpen(func() { l.host.send(msg) })
}

// hostUp starts the actor system and the keeper unless they are running
// (host.up), and reports false once Close has started.
func (l *Locker) hostUp() bool {
	return l.host.up(l.cfg.System, l.cfg.Logger, func() *actor.Props { return keeperProps(l, l.host.done) })
}

// startHost starts the actor system and the keeper in the background,
// unless they are running, for a watchdog about to be needed. Close waits
// for it.
func (l *Locker) startHost() {
	if l.host.idle() { // counted before Close closes the host
		go func() {
			defer l.host.starting.Done()
			l.hostUp()
		}()
	}
}

func (l *Locker) emit(ev Event) {
	if l.cfg.OnEvent != nil {
		l.cfg.OnEvent(ev)
	}
}

// report turns what a watchdog reports into the lock's events.
func (l *Locker) report(r leasehold.Report) {
	if ev := reportEvent(r); ev != nil {
		l.emit(ev)
	}
}

// Close releases every lock still held (with a compare-and-swap, as
// Guard.Release does), stops the watchdogs and the Locker's own actor
// system (if one was started), and makes later Acquire and TryAcquire calls (and those waiting)
// return lease.ErrClosed. Guards released by Close report lease.ErrReleased.
//
// It is bounded by ctx, or by DefaultCloseTimeout when ctx has no
// deadline, and returns a *CloseError naming the locks it could not release
// (their keys expire at the store) and what did not stop in time. It is
// idempotent: later calls wait for the first (or their own ctx) and return
// its result.
func (l *Locker) Close(ctx context.Context) error {
	if !l.life.startClose() {
		return l.life.closeResult(ctx)
	}
	defer close(l.life.closeDone)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCloseTimeout)
		defer cancel()
	}
	l.life.closeErr = l.close(ctx)
	return l.life.closeErr
}

// close is Close's work, in steps, once the Locker is marked closed.
func (l *Locker) close(ctx context.Context) error {
	var report CloseError
	// 0. Nothing starts the actor system from now on; up tells whether a
	//    message to the keeper had started it.
	up := l.host.close()

	// 1. No lock is taken under the session from now on, and the locks
	//    under it are marked released.
	sess, bound := l.closeSession()

	// 2. Locks whose watchdog has not started yet never will.
	waiting := l.closePending()
	for _, g := range waiting {
		g.hold.MarkReleased()
		l.unheld()
	}

	// 3. The keeper refuses new watchdogs from now on, marks every Hold
	//    released (no token, no new renewal) and lists the guards.
	//    (Without a keeper, no watchdog ever started.)
	var guards []*Guard
	if up {
		reply := make(chan []*Guard, 1)
		l.host.send(closeKeeper{reply: reply})
		if !wait(ctx, reply, &guards) {
			report.NotStopped = append(report.NotStopped, "the lock keeper (it did not answer)")
		}
	}
	guards = append(guards, waiting...)

	// 4. Stopping the keeper stops every watchdog; each finishes the
	//    renewal it may be sending (aborted: its Hold has ended) before it
	//    stops.
	if up {
		l.host.sys.Root.Stop(l.host.keeper)
		if !wait(ctx, l.host.done, nil) {
			report.NotStopped = append(report.NotStopped, strconv.FormatInt(l.held.n.Load(), 10)+" watchdogs")
		}
	}

	// 5. Release the locks, then the session.
	report.NotReleased = l.releaseAll(ctx, guards)
	report.NotReleased = append(report.NotReleased, l.releaseSession(ctx, sess, bound)...)

	// 6. Wait for the calls in progress, and the keys being given back.
	if !wait(ctx, l.life.callsDone, nil) {
		report.NotStopped = append(report.NotStopped, strconv.Itoa(l.life.inProgress())+" acquire calls")
	}
	l.life.lapses.Wait()   // each ends promptly: its store call honours bg, cancelled above
	l.host.starting.Wait() // returns at once: the host is closed
	if l.host.own != nil {
		l.host.own.Shutdown()
	}
	err := report.err()
	if err != nil {
		l.log.Warn("lock: closed with problems", "error", err)
	}
	return err
}

// wait receives from ch into *v (when v is not nil) and reports true, or
// reports false when ctx ends first. A ready ch wins over an ended ctx.
func wait[T any](ctx context.Context, ch <-chan T, v *T) bool {
	select {
	case x := <-ch:
		if v != nil {
			*v = x
		}
		return true
	default:
	}
	select {
	case x := <-ch:
		if v != nil {
			*v = x
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// releaseWorkers bounds the store calls Close makes at once.
const releaseWorkers = 32

// releaseAll releases guards at the store, a few at a time, and returns
// those it could not release. Guards already lost or released are skipped.
func (l *Locker) releaseAll(ctx context.Context, guards []*Guard) []NotReleased {
	return l.releaseEach(ctx, guards, func(g *Guard) (bool, error) { return g.closeRelease(ctx) })
}

// releaseEach runs release for every guard, a few at a time, and returns
// those it tried and could not release.
func (l *Locker) releaseEach(ctx context.Context, guards []*Guard, release func(*Guard) (tried bool, err error)) []NotReleased {
	var (
		mu     sync.Mutex
		failed []NotReleased
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for range min(releaseWorkers, len(guards)) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(guards)) {
					return
				}
				g := guards[i]
				tried, err := release(g)
				if !tried || err == nil {
					continue
				}
				mu.Lock()
				failed = append(failed, NotReleased{Resource: g.resource, Token: g.t.Lease().Token, Err: err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}
