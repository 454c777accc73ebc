package grains

import "errors"

// Errors reported by this package, besides the lease errors it passes
// through (lease.ErrInvalid, lease.ErrUnavailable, lease.ErrClosed). Check
// them with errors.Is.
var (
	// ErrUnknownKind reports a call of a kind that no member of the
	// cluster hosts.
	ErrUnknownKind = errors.New("grains: no member hosts this kind")

	// ErrNoActivation reports a lookup that found no activation within its
	// bound (Config.ActivationTimeout): every member asked failed, or the
	// identity's previous activation still held its lock (a dead member's
	// session that has not ended yet, a handover under way).
	ErrNoActivation = errors.New("grains: no activation")

	// ErrNotActive is the answer of an activation that is no longer valid
	// (its session was lost, or it is stopping): the message was not
	// handled. Callers look the identity up again.
	ErrNotActive = errors.New("grains: the activation is no longer valid")

	// ErrNotStarted reports a call on a Member before StartMember or
	// StartClient.
	ErrNotStarted = errors.New("grains: the member has not started")
)
