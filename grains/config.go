package grains

import (
	"context"
	"log/slog"
	"time"

	"github.com/asterforge/aster/lease"
)

// Defaults of Config.
const (
	// DefaultPrefix names a cluster's leases when Config.Prefix is empty.
	DefaultPrefix = "grains"
	// DefaultJoinTimeout bounds StartMember's first acquisition of the
	// membership lease.
	DefaultJoinTimeout = 10 * time.Second
)

// Store is what a cluster needs of its lease store: leases, leases under a
// session (the activations), reading who holds a lease without taking it
// (the lookup), and a watch of every lease under a prefix (the
// membership). natsstore.Store is one; shardtest.MemStore is one in memory.
type Store interface {
	lease.SessionStore
	lease.Reader
	// WatchPrefix is shard.Directory's: the leases held under prefix now,
	// then every change, until ctx ends.
	WatchPrefix(ctx context.Context, prefix string) (current []lease.Event, changes <-chan lease.Event, err error)
}

// Config configures a Member. The zero value works: prefix "grains", the
// lease defaults (TTL 30 s, a renewal every 10 s). Config is taken by value
// and never modified.
type Config struct {
	// Prefix names the cluster's leases: Prefix+".members.<member>" (one per
	// member, with its address and kinds), Prefix+".session.<term>" (one
	// per member: the session its activations are held under) and
	// Prefix+".grain.<kind>.<identity>" (one per activation, under a
	// session). Members of one cluster use the same Prefix and the same
	// bucket. "" means DefaultPrefix.
	Prefix string

	// TTL, RenewInterval, SafetyMargin and StopTimeout are those of
	// lease.Config, for the membership lease and the session alike. A
	// crashed member's activations move about a TTL after its last
	// renewal; its membership lease leaves the member lists when the
	// store reports it expired (natsstore: TTL plus its ExpiryGrace).
	TTL           time.Duration
	RenewInterval time.Duration
	SafetyMargin  time.Duration
	StopTimeout   time.Duration

	// ActivationTimeout bounds one lookup (IdentityLookup.Get): reading who
	// holds the identity, asking members to activate it, and the wait of
	// the member that activates it for the previous activation's lock (a
	// dead member's session ends about a TTL after its last renewal). 0
	// means twice the TTL.
	ActivationTimeout time.Duration

	// JoinTimeout bounds StartMember: the first acquisition of the
	// membership lease. 0 means DefaultJoinTimeout.
	JoinTimeout time.Duration

	// Logger receives the member's records. nil discards them.
	Logger *slog.Logger
}

func (c Config) prefix() string {
	if c.Prefix == "" {
		return DefaultPrefix
	}
	return c.Prefix
}

// lease returns the lease.Config of a member's leases (without ID).
func (c Config) lease(owner string) lease.Config {
	return lease.Config{OwnerID: owner, TTL: c.TTL, RenewInterval: c.RenewInterval,
		SafetyMargin: c.SafetyMargin, StopTimeout: c.StopTimeout}
}

func (c Config) activationTimeout() time.Duration {
	if c.ActivationTimeout > 0 {
		return c.ActivationTimeout
	}
	return 2 * c.lease("x").EffectiveTTL()
}

func (c Config) joinTimeout() time.Duration {
	if c.JoinTimeout > 0 {
		return c.JoinTimeout
	}
	return DefaultJoinTimeout
}

// Validate reports the first problem with c; it matches lease.ErrInvalid.
func (c Config) Validate() error {
	if err := lease.ValidateLeaseID(c.prefix() + ".members.x"); err != nil {
		return &lease.FieldError{Field: "Prefix", Reason: "must make valid lease IDs: " + err.Error()}
	}
	if c.ActivationTimeout < 0 || c.JoinTimeout < 0 {
		return &lease.FieldError{Field: "ActivationTimeout", Reason: "timeouts must not be negative"}
	}
	lc := c.lease("x")
	lc.LeaseID = "x"
	return lc.Validate()
}
