package actors

import (
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// A term that renewed nothing until its renew deadline (lease.LossDeadline:
// the store did not answer, or the process was paused; the store never said
// that the lease was lost) has
// stopped its workload in time, but its lease may still be held at the
// store: a stream that elects a new leader answers nobody for up to 9 s,
// longer than the renew deadline of a 10 s TTL, and keeps every key as it
// was. Such a lease "lapsed": the supervisor keeps it instead of releasing
// it, and tries to renew it, with a compare-and-swap on the revision of its
// last successful write, every few hundred milliseconds and at once when its
// watch sees the key still held by the term, until the store answers. The
// store decides: a lease it expired or gave to another is lost (ErrLost).
// A store that never answers is given one TTL more than the lease could
// have lasted: the tries stop at that write's send time + 2 × TTL. (A
// server may expire a key some time after its TTL, as nats-server was seen
// to after a stream election. A renewal that lands before is as safe as
// any other.)
//
// A renewal that succeeds proves that nobody wrote the key since the term's
// last write: no other term acquired it in between. The term then resumes:
// a new Hold from the renewal's send time, the same term and token, and the
// workload started again (Acquired with Resumed set). The workload never
// ran while the lease was not renewed: it stopped at the renew deadline and
// starts only after the renewal returned. So a store outage that the TTL
// covers costs a workload gap but no handover: the token does not change,
// and standbys keep waiting.
//
// A renewal answered with lease.ErrLost (another term wrote the key, or it
// expired) ends the lapse, and the next attempt acquires as usual.

// resumeRetry is the backoff between failed renewals of a lapsed lease: from
// 25 ms to 250 ms, full jitter, so that the term resumes within a quarter of
// a second of the store's return.
var resumeRetry = backoff.Policy{Base: 25 * time.Millisecond, Cap: 250 * time.Millisecond, Jitter: backoff.Full}

// lapse keeps t's lease, whose renew deadline passed while the store did not
// answer, to resume it, and reports whether it did. The lease is not
// released: it stays held by t's term at the store until it is resumed or
// expires.
func (s *supervisor) lapse(t *term) bool {
	var lost *lease.LostError
	if t.end.how != endLost || !errors.As(t.hold.Err(), &lost) || lost.Reason != lease.LossDeadline ||
		s.s.shared.closing.Load() {
		return false
	}
	l := t.hold.Lease()
	// ValidUntil is the last write's send time + TTL - SafetyMargin.
	ttl := s.s.cfg.Lease.EffectiveTTL()
	until := t.hold.ValidUntil().Add(s.s.cfg.Lease.EffectiveSafetyMargin() + ttl)
	if !time.Now().Before(until) {
		return false
	}
	s.lapsed.lease, s.lapsed.until = l, until
	s.lapsed.retries.Reset()
	s.s.logAttrs(slog.LevelWarn, "lease lapsed: no renewal succeeded before the renew deadline; "+
		"the workload stopped, and the term resumes with the same token if the store still holds the lease", l.Token,
		slog.Time("resumable_until", until))
	return true
}

// resume tries to renew the lapsed lease, and leads with it when that
// succeeds. It reports false, having made no store call, when the tries
// are over: the caller acquires instead.
func (s *supervisor) resume(c actor.Context) bool {
	l, until := s.lapsed.lease, s.lapsed.until
	sent := leasehold.Now()
	if !sent.At.Before(until) {
		s.endLapse("the store did not answer for one TTL after the lease could have expired", l.Token)
		return false
	}
	ctx, cancel := s.s.opContext(until)
	renewed, err := s.s.cfg.Store.Renew(ctx, l)
	cancel()
	switch {
	case err == nil && s.s.shared.closing.Load():
		s.lapsed.forget()
		s.giveBack(renewed, sent) // Run is returning: no term starts
	case err == nil:
		s.lapsed.forget()
		s.lead(c, renewed, sent, true)
	case errors.Is(err, lease.ErrLost):
		s.errs.answered()
		s.endLapse("another term wrote the key, or it expired", l.Token)
		s.waiting(WaitNone, time.Time{})
		s.arm(0) // acquire now
		s.publish()
	default:
		s.errs.storeFailed(err)
		level := slog.LevelInfo
		if s.lapsed.retries.Attempt() > 0 {
			level = slog.LevelDebug // said once
		}
		delay := min(s.lapsed.retries.Failed(time.Now()), time.Until(until))
		s.s.logAttrs(level, "lapsed lease not renewed yet; retrying", l.Token, slog.Any("error", err),
			slog.Duration("retry_in", delay))
		s.arm(delay)
		s.waiting(WaitBackoff, s.timer.due)
		s.publish()
	}
	return true
}

// endLapse forgets the lapsed lease: it cannot be resumed.
func (s *supervisor) endLapse(why string, token lease.Token) {
	s.lapsed.forget()
	s.s.logAttrs(slog.LevelInfo, "lapsed lease not resumed: "+why, token)
}

// releaseLapsed gives the lapsed lease back, if there is one that may still
// be held (Resign, shutdown): its standbys then take over at once instead of
// waiting for it to expire.
func (s *supervisor) releaseLapsed() {
	l, until := s.lapsed.lease, s.lapsed.until
	if l.ID == "" {
		return
	}
	s.lapsed.forget()
	if !time.Now().Before(until) {
		return
	}
	ctx, cancel := s.s.opContext(until)
	defer cancel()
	if err := s.s.cfg.Store.Release(ctx, l); err != nil && !errors.Is(err, lease.ErrLost) {
		s.s.logAttrs(slog.LevelWarn, s.s.notReleased("lapsed lease", err), l.Token, slog.Any("error", err))
	}
}
