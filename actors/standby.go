package actors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// acquireBackoff is how a standby backs off after acquisitions that fail for
// a reason retrying soon cannot fix (a corrupt key, a misconfigured store):
// from the retry interval up to 20 times it, at most 5 minutes.
func acquireBackoff(retry time.Duration) backoff.Policy {
	return backoff.Policy{Base: retry, Cap: max(min(20*retry, 5*time.Minute), retry), Jitter: backoff.Equal,
		ResetAfter: time.Duration(1 << 62)}
}

// tryAcquire makes one acquisition attempt and leads, or schedules the
// next, in steps:
//
//  1. open the standby watch if none is open, before acquiring, so that a
//     release right after is seen;
//  2. wait while a hold off lasts or a workload of an earlier term may run;
//  3. renew a lapsed lease instead, while the store may still hold it;
//  4. ask the store;
//  5. act on its answer: lead, stand by, retry later, or escalate.
func (s *supervisor) tryAcquire(c actor.Context) {
	if s.wake.watch == nil {
		s.startWatch()
	}
	if s.mustWait() {
		return
	}
	if s.lapsed.active() && s.resume(c) {
		return
	}
	a, sent, err := s.acquire()
	s.answer(c, a, sent, err)
}

// mustWait reports whether no attempt may be made now, having scheduled
// the next: a hold off lasts, or a workload of an earlier term may still
// run.
func (s *supervisor) mustWait() bool {
	if now := time.Now(); s.cand.holdingOff(now) {
		s.arm(s.cand.holdOff.Sub(now)) // the watch goes on telling who holds it
		s.waiting(WaitHoldOff, s.cand.holdOff)
		s.publish()
		return true
	}
	n := s.s.shared.live.busy()
	if n == 0 {
		return false
	}
	if s.wake.drain == 0 {
		s.s.logAttrs(slog.LevelWarn, "not acquiring: a workload of an earlier term may still run", 0,
			slog.Int("stuck", n), slog.Any("tokens", s.s.shared.live.tokens()))
	}
	s.waitDrained()
	s.arm(s.s.retryDelay())
	s.waiting(WaitStuck, time.Time{})
	s.publish()
	return true
}

// acquire asks the store for the lease once, and measures the round trip.
func (s *supervisor) acquire() (lease.Acquisition, leasehold.Sent, error) {
	cfg := s.s.cfg
	sent := leasehold.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.s.opTimeout())
	a, err := cfg.Store.Acquire(ctx, lease.Claim{LeaseID: cfg.Lease.LeaseID, OwnerID: cfg.Lease.OwnerID,
		Term: s.cand.claimTerm, TTL: cfg.Lease.EffectiveTTL(), Meta: cfg.Meta})
	cancel()
	err = storeStopped(cfg.Store, err)
	outcome := "held"
	switch {
	case err != nil:
		outcome = "failed"
	case a.Acquired:
		outcome = "acquired"
	}
	s.s.metrics.attempted(time.Since(sent.At), outcome)
	return a, sent, err
}

// answer acts on the store's answer to an attempt sent at sent.
func (s *supervisor) answer(c actor.Context, a lease.Acquisition, sent leasehold.Sent, err error) {
	switch {
	case err != nil && fatalStoreError(err):
		s.errs.failed(err)
		s.s.logAttrs(slog.LevelError, "lease acquisition cannot succeed", 0, slog.Any("error", err))
		s.s.emit(AcquisitionFailed{Subject: s.s.subject(), Err: err, Attempt: s.acq.fails + 1})
		s.escalate(c, err)
	case err != nil:
		s.acquisitionFailed(err)
	case !a.Acquired:
		s.acq.answered()
		s.errs.answered()
		s.heldBy(a)
	case s.s.shared.closing.Load():
		// Run is returning: no term starts. Give the lease back.
		s.giveBack(a.Lease, sent)
	default:
		s.acq.answered()
		s.lead(c, a.Lease, sent, false)
	}
}

// heldBy records that the lease is not free, and schedules the next
// attempt: after the retry delay, or sooner when the store says when it
// will let this instance take the lease.
func (s *supervisor) heldBy(a lease.Acquisition) {
	var until time.Time // when the store will let this instance take it
	if a.ExpiresIn > 0 {
		until = time.Now().Add(a.ExpiresIn)
	}
	why := WaitHeld
	if a.Holder.OwnerID == "" && a.Holder.Session == "" {
		why = WaitVanished
	}
	s.waiting(why, until)
	s.sawHolder(a.Holder)
	delay := s.s.retryDelay()
	if a.ExpiresIn > 0 { // the store judges expiry itself: try when it will
		delay = min(delay, a.ExpiresIn+time.Millisecond)
	}
	s.arm(delay)
	s.publish()
}

// acquisitionFailed reports a failed attempt and schedules the next: after
// the retry interval for a transient error, after a growing backoff for a
// corrupt key or a misconfigured store.
func (s *supervisor) acquisitionFailed(err error) {
	s.acq.fails++
	s.errs.storeFailed(err)
	delay := s.s.retryDelay()
	level := slog.LevelWarn
	corrupt := errors.Is(err, lease.ErrCorrupt)
	permanent := corrupt || errors.Is(err, lease.ErrStoreConfig)
	if permanent {
		delay = s.acq.backoff.Failed(time.Now())
		level = slog.LevelError
	}
	if s.acq.fails > 1 && !permanent {
		level = slog.LevelDebug // said once; the event carries every attempt
	}
	s.s.logAttrs(level, "lease acquisition failed; retrying", 0, slog.Any("error", err),
		slog.Int("attempt", s.acq.fails), slog.Duration("retry_in", delay))
	s.s.emit(AcquisitionFailed{Subject: s.s.subject(), Err: err, Attempt: s.acq.fails, RetryIn: delay})
	s.arm(delay)
	if corrupt { // until an operator deletes the key: no end is known
		s.waiting(WaitCorrupt, time.Time{})
	} else {
		s.waiting(WaitBackoff, s.timer.due)
	}
	s.publish()
}

// giveBack releases a lease acquired when no term may start.
func (s *supervisor) giveBack(l lease.Lease, sent leasehold.Sent) {
	validUntil := s.s.cfg.Lease.ValidUntil(sent.At)
	ctx, cancel := s.s.opContext(validUntil)
	defer cancel()
	if err := s.s.cfg.Store.Release(ctx, l); err != nil {
		s.s.logAttrs(slog.LevelWarn, s.s.notReleased("a lease acquired while shutting down was", err),
			l.Token, slog.Any("error", err))
	}
}

// waitDrained arranges a liveDrained message for when no workload of an
// earlier term runs any more.
func (s *supervisor) waitDrained() {
	if s.wake.drain != 0 {
		return
	}
	gen, self, root := s.wake.next(), s.me.pid, s.me.sys.Root
	cancel, ok := s.s.shared.live.onDrained(func() { root.Send(self, liveDrained{gen: gen}) })
	if ok {
		s.wake.drain, s.wake.cancelDrain = gen, cancel
	}
}

// sawHolder records the holder seen in standby and reports a change.
func (s *supervisor) sawHolder(h lease.Holder) {
	if !s.cand.saw(h, s.s.cfg.Lease.OwnerID) {
		return
	}
	switch {
	case h.OwnerID == "":
		var until []slog.Attr
		if w := s.wait; w.reason == WaitVanished && !w.until.IsZero() {
			until = append(until, slog.Time("free_at", w.until), slog.Duration("wait", time.Until(w.until)))
		}
		s.s.logAttrs(slog.LevelInfo, "lease not free yet: its key vanished without a release, "+
			"and its last holder may act until the longest TTL it could have had has run out; standing by", 0, until...)
	case h.OwnerID == s.s.cfg.Lease.OwnerID:
		s.s.logAttrs(slog.LevelInfo, "lease held by an earlier term of this instance; standing by until it expires", 0,
			slog.String("term", h.Term), slog.Uint64("holder_token", uint64(h.Token)))
	default:
		s.s.logAttrs(slog.LevelInfo, "lease held by another instance; standing by", 0,
			slog.String("owner", h.OwnerID), slog.String("term", h.Term), slog.Uint64("holder_token", uint64(h.Token)))
	}
	s.s.emit(Standby{Subject: s.s.subject(), Holder: h})
}

// watchEvent handles what the standby watch saw.
func (s *supervisor) watchEvent(c actor.Context, msg watchEvent) {
	if msg.gen != s.wake.gen || s.state != StateStandby {
		return
	}
	if st, ok := s.s.cfg.Store.(stoppedStore); ok && st.Err() != nil {
		// The store stopped for good, and its watch may still tell who
		// writes the key: an attempt now ends Run with the store's error,
		// instead of a report of a holder this instance can never follow.
		s.disarm()
		s.tryAcquire(c)
		return
	}
	switch msg.ev.Kind {
	case lease.EventFree:
		if s.timer.due.IsZero() || !s.cand.holdingOff(time.Now()) {
			s.disarm()
			s.tryAcquire(c)
		}
	case lease.EventHeld:
		s.heldEvent(c, msg.ev.Holder)
	}
}

// heldEvent handles a write of the lease by h that the standby watch saw.
func (s *supervisor) heldEvent(c actor.Context, h lease.Holder) {
	if s.lapsed.active() && h.Term == s.lapsed.lease.Term {
		// The store answers again and still has the lapsed lease's
		// term: renew it now, not at the next retry.
		s.disarm()
		s.tryAcquire(c)
		return
	}
	if h.Term == s.cand.claimTerm {
		return
	}
	s.sawHolder(h)
	// A store that judges expiry by observation (natsstore) frees the key
	// once it has seen this write unchanged for its TTL, counted from this
	// event: try then, not at the next poll.
	if ttl := h.TTL; ttl > 0 && !s.cand.holdingOff(time.Now()) {
		s.arm(min(ttl+time.Millisecond, s.s.retryDelay()))
		if h.Session == "" {
			s.waiting(WaitHeld, time.Now().Add(ttl))
		}
	}
	s.publish()
}

// startWatch opens the store's watch, if it has one, on a goroutine that
// forwards its events: opening a watch can take as long as the store's
// timeout (a stream without a leader), and the actor must not wait for it.
func (s *supervisor) startWatch() {
	w, ok := s.s.cfg.Store.(lease.Watcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	gen, self, root, id := s.wake.next(), s.me.pid, s.me.sys.Root, s.s.cfg.Lease.LeaseID
	s.wake.watch = cancel
	s.s.shared.bg.Go(func() {
		defer cancel()
		ch, err := w.Watch(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				root.Send(self, watchEnded{gen: gen, err: err})
			}
			return
		}
		for ev := range ch {
			root.Send(self, watchEvent{gen: gen, ev: ev})
		}
		if ctx.Err() == nil {
			root.Send(self, watchEnded{gen: gen})
		}
	})
}

// stopWatch closes the standby watch without waiting for it: its goroutine
// ends on its own (Run waits for it).
func (s *supervisor) stopWatch() {
	s.wake.stopWatch() // events still queued are stale
}
