package leasehold

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/lease"
)

// Message is a message a Watchdog sends or accepts. The set is sealed: only
// this package defines Messages.
type Message interface{ isMessage() }

// Poison is sent by a Watchdog to its parent when it gives up its lease:
// at once when the store says the lease is lost (or gives an answer that
// retrying cannot fix), and otherwise when renewals have failed until the
// renew deadline. The Hold is poisoned before Poison is sent, so token
// reads already fail when it arrives.
type Poison struct {
	LeaseID string
	Token   lease.Token
	Reason  lease.LossReason
	Err     error // the Hold's cause: a *lease.LostError matching lease.ErrLost
}

// Extend asks a Watchdog to renew at once with TTL, and with TTL from then
// on (a lock's Extend). The answer is an ExtendResult, sent to Reply when
// it is not nil (it must be buffered: the watchdog never blocks on it),
// and otherwise to the sender of a Request. Use RequestExtend.
type Extend struct {
	TTL   time.Duration
	Reply chan<- ExtendResult
}

// ExtendResult answers Extend. When Err is nil the lease was renewed with
// the new TTL and is valid until ValidUntil. When Err matches
// lease.ErrInvalid the TTL was refused and nothing changed; any other
// error means the renewal with the new TTL has not succeeded yet: the
// Watchdog keeps the new TTL and goes on retrying (or has poisoned the
// Hold, when Err matches lease.ErrLost). A renewal with a shorter TTL may
// have landed even though it failed, so ValidUntil is then already no
// later than the new TTL allows (see Hold).
type ExtendResult struct {
	Lease      lease.Lease
	ValidUntil time.Time
	Err        error
}

func (Poison) isMessage()       {}
func (Extend) isMessage()       {}
func (ExtendResult) isMessage() {}

// RequestExtend asks the Watchdog at pid to renew at once with ttl, and
// with ttl from then on, and waits for its answer until ctx is done. The
// returned error is ExtendResult.Err, or ctx's error.
func RequestExtend(ctx context.Context, sender actor.SenderContext, pid *actor.PID, ttl time.Duration) (ExtendResult, error) {
	if pid == nil {
		return ExtendResult{}, fmt.Errorf("%w: no watchdog", lease.ErrInvalid)
	}
	reply := make(chan ExtendResult, 1)
	sender.Send(pid, Extend{TTL: ttl, Reply: reply})
	select {
	case r := <-reply:
		return r, r.Err
	case <-ctx.Done():
		return ExtendResult{}, context.Cause(ctx)
	}
}
