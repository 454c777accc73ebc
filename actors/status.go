package actors

import (
	"time"

	"github.com/asterforge/aster/lease"
)

// State is where a LeaseSupervisor is in its cycle. The zero value is
// StateStarting.
type State uint8

const (
	// StateStarting: not started yet, or Run has not spawned it yet.
	StateStarting State = iota
	// StateStandby: trying to acquire the lease, or waiting to try again.
	StateStandby
	// StateLeading: holding the lease; the workload runs.
	StateLeading
	// StateStopping: a term is ending: its workload has been told to stop
	// and the lease is released once it has.
	StateStopping
	// StateRestarting: waiting a backoff after a term ended by a failure.
	StateRestarting
	// StateEscalated: gave up and handed the failure to its parent (Run
	// returns it).
	StateEscalated
	// StateStopped: shut down.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateStarting:
		return "starting"
	case StateStandby:
		return "standby"
	case StateLeading:
		return "leading"
	case StateStopping:
		return "stopping"
	case StateRestarting:
		return "restarting"
	case StateEscalated:
		return "escalated"
	case StateStopped:
		return "stopped"
	default:
		return "unknown"
	}
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Status is a LeaseSupervisor's state as it last reported it: what
// LeaseSupervisor.Status returns. It is a value: it does not change
// afterwards.
type Status struct {
	LeaseID string `json:"lease_id"`
	OwnerID string `json:"owner_id"`
	State   State  `json:"state"`
	// Since is when the supervisor entered State.
	Since time.Time `json:"since"`

	// Term and Token are the current term's while leading or stopping, and
	// the last term's afterwards ("" and 0 before the first).
	Term  string      `json:"term,omitempty"`
	Token lease.Token `json:"token,omitempty"`
	// ValidUntil is until when the current term may act (leading and
	// stopping only), on this process's clock.
	ValidUntil time.Time `json:"valid_until,omitzero"`
	// RenewedAt is when the lease was last renewed (leading only).
	RenewedAt time.Time `json:"renewed_at,omitzero"`

	// Holder is who holds the lease, as a standby last saw it (zero when
	// unknown, or while this instance leads).
	Holder lease.Holder `json:"holder,omitzero"`
	// HoldOffUntil is when a standby that stepped down or resigned
	// competes again.
	HoldOffUntil time.Time `json:"hold_off_until,omitzero"`
	// RetryAt is when the next acquisition attempt, or the end of a
	// restart backoff, is due (standby and restarting).
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Wait says why a standby or a restarting supervisor does not lead
	// (WaitNone while it leads or has stopped), and WaitUntil until when,
	// at the earliest, if nothing changes meanwhile: when the holder's TTL
	// runs out unless it renews, when a vanished key may be taken, when a
	// hold off or a backoff ends. WaitUntil is zero when the end is not
	// known (a corrupt key waits for an operator; a stuck workload for
	// itself), and then RetryAt says when the supervisor looks again.
	Wait      WaitReason `json:"wait,omitempty"`
	WaitUntil time.Time  `json:"wait_until,omitzero"`
	// ResumableUntil is set while the last term (Term, Token) has lapsed:
	// its renewals failed until the renew deadline and its workload
	// stopped, but the store may still hold its lease. Until then (its
	// last write's send time + 2 × TTL) the standby tries to renew it and,
	// if the store still has it, leads again with the same token.
	ResumableUntil time.Time `json:"resumable_until,omitzero"`

	// Stuck counts the workloads of earlier terms that did not stop and
	// may still run: no term starts until they have stopped.
	Stuck int `json:"stuck,omitempty"`
	// Restarts counts the terms that ended by a failure within the
	// RestartPolicy's period.
	Restarts int `json:"restarts,omitempty"`
	// LastError is the last error: a failed acquisition, a lost lease, a
	// failed workload; "" when none. LastErrorAt is when it happened.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// LastErrorCleared is when a later step succeeded: for an error of
	// the store in standby (a failed acquisition attempt, or renewal of a
	// lapsed term), its next answer; for the end of a term (a lost lease,
	// a failed workload), the next term. LastError then tells the past,
	// not why the supervisor waits now. Zero while LastError still stands.
	LastErrorCleared time.Time `json:"last_error_cleared,omitzero"`
}

// WaitReason says why a LeaseSupervisor that does not lead waits (see
// Status.Wait). The zero value, WaitNone, is reported while it leads, stops
// or has stopped, and while it is about to try again at once.
type WaitReason uint8

const (
	// WaitNone: not waiting.
	WaitNone WaitReason = iota
	// WaitHeld: another term holds the lease. WaitUntil is when the store
	// will let this instance take it unless the holder renews it first
	// (Acquisition.ExpiresIn); zero when the store does not say.
	WaitHeld
	// WaitVanished: the key vanished without a release (deleted or purged
	// by hand, or emptied by a stream purge). Nobody holds it, but its last
	// holder may still act, so the store lets nobody take it until the
	// longest TTL any holder could have had has passed (a natsstore
	// bucket's MaxTTL): WaitUntil, or zero when the store does not say.
	WaitVanished
	// WaitCorrupt: the key holds a value that is not a lease. Nobody can
	// take the lease until an operator deletes it, after which a
	// WaitVanished follows; LastError says which key. WaitUntil is zero.
	WaitCorrupt
	// WaitHoldOff: this instance stepped down or resigned and leaves the
	// lease to others until WaitUntil.
	WaitHoldOff
	// WaitBackoff: the last acquisition attempts failed (LastError); the
	// next is at WaitUntil.
	WaitBackoff
	// WaitRestart: a term ended by a failure (LastError); the restart
	// backoff ends at WaitUntil.
	WaitRestart
	// WaitStuck: a workload of an earlier term may still run (Stuck); no
	// term starts until it has stopped. WaitUntil is zero.
	WaitStuck
)

var waitNames = [...]string{"none", "held", "vanished", "corrupt", "hold-off", "backoff", "restart", "stuck"}

func (w WaitReason) String() string {
	if int(w) < len(waitNames) {
		return waitNames[w]
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler.
func (w WaitReason) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// Remaining returns how long the current term stays valid without a
// renewal, or 0 when not leading.
func (s Status) Remaining() time.Duration {
	if s.State != StateLeading && s.State != StateStopping {
		return 0
	}
	return max(time.Until(s.ValidUntil), 0)
}
