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

// tryAcquire makes one acquisition attempt and leads, or schedules the next.
func (s *supervisor) tryAcquire(c actor.Context) {
	cfg := s.s.cfg
	if s.watch == nil {
		s.startWatch() // before acquiring, so that a release right after is seen
	}
	if now := time.Now(); now.Before(s.holdOff) {
		s.arm(s.holdOff.Sub(now)) // the watch goes on telling who holds it
		s.waiting(WaitHoldOff, s.holdOff)
		s.publish()
		return
	}
	if n := s.s.shared.live.busy(); n > 0 {
		if s.waitLive == 0 {
			s.s.logAttrs(slog.LevelWarn, "not acquiring: a workload of an earlier term may still run", 0,
				slog.Int("stuck", n), slog.Any("tokens", s.s.shared.live.tokens()))
		}
		s.waitDrained()
		s.arm(s.s.retryDelay())
		s.waiting(WaitStuck, time.Time{})
		s.publish()
		return
	}
	if s.lapsed.ID != "" && s.resume(c) {
		return
	}
	sent := leasehold.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.s.opTimeout())
	a, err := cfg.Store.Acquire(ctx, lease.Claim{LeaseID: cfg.Lease.LeaseID, OwnerID: cfg.Lease.OwnerID,
		Term: s.claimTerm, TTL: cfg.Lease.EffectiveTTL(), Meta: cfg.Meta})
	cancel()
	err = storeStopped(cfg.Store, err)
	switch {
	case err != nil:
		s.s.metrics.attempted(time.Since(sent.At), "failed")
	case a.Acquired:
		s.s.metrics.attempted(time.Since(sent.At), "acquired")
	default:
		s.s.metrics.attempted(time.Since(sent.At), "held")
	}
	switch {
	case err != nil && fatalStoreError(err):
		s.failed(err)
		s.s.logAttrs(slog.LevelError, "lease acquisition cannot succeed", 0, slog.Any("error", err))
		s.s.emit(AcquisitionFailed{Subject: s.s.subject(), Err: err, Attempt: s.acqFails + 1})
		s.escalate(c, err)
	case err != nil:
		s.acquisitionFailed(err)
	case !a.Acquired:
		s.acqFails = 0
		s.acqBackoff.Reset()
		s.answered()
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
	case s.s.shared.closing.Load():
		// Run is returning: no term starts. Give the lease back.
		s.giveBack(a.Lease, sent)
	default:
		s.acqFails = 0
		s.acqBackoff.Reset()
		s.lead(c, a.Lease, sent, false)
	}
}

// acquisitionFailed reports a failed attempt and schedules the next: after
// the retry interval for a transient error, after a growing backoff for a
// corrupt key or a misconfigured store.
func (s *supervisor) acquisitionFailed(err error) {
	s.acqFails++
	s.storeFailed(err)
	delay := s.s.retryDelay()
	level := slog.LevelWarn
	corrupt := errors.Is(err, lease.ErrCorrupt)
	permanent := corrupt || errors.Is(err, lease.ErrStoreConfig)
	if permanent {
		delay = s.acqBackoff.Failed(time.Now())
		level = slog.LevelError
	}
	if s.acqFails > 1 && !permanent {
		level = slog.LevelDebug // said once; the event carries every attempt
	}
	s.s.logAttrs(level, "lease acquisition failed; retrying", 0, slog.Any("error", err),
		slog.Int("attempt", s.acqFails), slog.Duration("retry_in", delay))
	s.s.emit(AcquisitionFailed{Subject: s.s.subject(), Err: err, Attempt: s.acqFails, RetryIn: delay})
	s.arm(delay)
	if corrupt { // until an operator deletes the key: no end is known
		s.waiting(WaitCorrupt, time.Time{})
	} else {
		s.waiting(WaitBackoff, s.due)
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
	if s.waitLive != 0 {
		return
	}
	s.watchGen++ // a generation shared with watches: unique per incarnation
	gen, self, root := s.watchGen, s.self, s.system.Root
	cancel, ok := s.s.shared.live.onDrained(func() { root.Send(self, liveDrained{gen: gen}) })
	if ok {
		s.waitLive, s.cancelLive = gen, cancel
	}
}

// sawHolder records the holder seen in standby and reports a change.
func (s *supervisor) sawHolder(h lease.Holder) {
	if h.OwnerID != "" && h.OwnerID != s.s.cfg.Lease.OwnerID { // not an earlier term of this instance
		s.seenOther = true
	}
	if s.yielded != "" && h.Term != "" && h.Term != s.yielded && h.Term != s.claimTerm {
		// Another term took over from the one that stepped down: the hold
		// off has done its work, and this instance competes again.
		s.holdOff, s.yielded = time.Time{}, ""
	}
	if s.holderSeen && h.Term == s.holder.Term && h.OwnerID == s.holder.OwnerID {
		s.holder = h
		return
	}
	s.holder, s.holderSeen = h, true
	switch {
	case h.OwnerID == "":
		var until []slog.Attr
		if s.wait == WaitVanished && !s.waitUntil.IsZero() {
			until = append(until, slog.Time("free_at", s.waitUntil), slog.Duration("wait", time.Until(s.waitUntil)))
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
	if msg.gen != s.watchGen || s.state != StateStandby {
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
		if s.due.IsZero() || !time.Now().Before(s.holdOff) {
			s.disarm()
			s.tryAcquire(c)
		}
	case lease.EventHeld:
		if s.lapsed.ID != "" && msg.ev.Holder.Term == s.lapsed.Term {
			// The store answers again and still has the lapsed lease's
			// term: renew it now, not at the next retry.
			s.disarm()
			s.tryAcquire(c)
			return
		}
		if msg.ev.Holder.Term != s.claimTerm {
			s.sawHolder(msg.ev.Holder)
			// A store that judges expiry by observation (natsstore) frees
			// the key once it has seen this write unchanged for its TTL,
			// counted from this event: try then, not at the next poll.
			if ttl := msg.ev.Holder.TTL; ttl > 0 && !time.Now().Before(s.holdOff) {
				s.arm(min(ttl+time.Millisecond, s.s.retryDelay()))
				if msg.ev.Holder.Session == "" {
					s.waiting(WaitHeld, time.Now().Add(ttl))
				}
			}
			s.publish()
		}
	}
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
	s.watchGen++
	gen, self, root, id := s.watchGen, s.self, s.system.Root, s.s.cfg.Lease.LeaseID
	s.watch = cancel
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
	if s.watch != nil {
		s.watch()
		s.watch = nil
		s.watchGen++ // events still queued are stale
	}
}
