package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// Config declares a sharded workload and this instance's part in it. Prefix,
// Lease.OwnerID, Store and Workload are required (Directory too, unless
// Store implements it); every other zero value works. Every instance of a
// fleet is given the same Prefix, Shards and lease timing, and an OwnerID
// of its own.
type Config struct {
	// Prefix names the fleet's leases: each member announces itself under
	// Prefix.members.<OwnerID>, and shard s is guarded by Prefix.shards.<s>.
	// It must be a valid lease ID (see lease.Config.LeaseID).
	Prefix string

	// Shards names the shards: Range("tenant", 64) for tenant/0 …
	// tenant/63, or any names that are valid in a lease ID. Host.SetShards
	// changes them at run time. Instances given different sets compute
	// different placements: balance suffers until they agree, never safety.
	Shards []string

	// Lease says how every lease of the fleet is kept: TTL, renew interval,
	// standby retry, safety margin and stop timeout, as for a singleton.
	// OwnerID names this instance, and must be usable in a lease ID (a pod
	// name, or lease.NewOwnerID()); LeaseID must be empty: the Host derives
	// one per shard.
	Lease lease.Config

	// Store keeps the leases.
	Store lease.Store

	// Directory watches the fleet's leases. nil means Store, which must then
	// implement Directory.
	Directory Directory

	// Workload returns what runs while this instance holds shard: a
	// function, Props or a supervision tree, exactly as for a singleton.
	// It is called once per shard, the first time this instance runs it;
	// the workload gets the shard's fencing token (and Term) as a singleton's
	// does. Its context is cancelled with actors.ErrResigned when the shard
	// is handed over.
	Workload func(shard string) actors.Workload

	// Meta is published with this instance's membership lease and with every
	// shard lease it holds (lease.Holder.Meta): an address, a pod name.
	Meta map[string]string

	// Restart is each shard's restart policy, as a singleton's
	// (actors.RestartPolicy).
	Restart actors.RestartPolicy

	// Quarantine is how long a shard whose supervisor gave up (more
	// restarts within the policy's period than it allows) waits before this
	// instance runs it again. The shard stays placed here meanwhile, so that
	// one failing shard cannot crash its way through the fleet. 0 means the
	// restart policy's period (1 minute by default).
	Quarantine time.Duration

	// Logger receives the Host's records (with owner_id, and shard where one
	// is concerned) and those of its lease supervisors. nil discards them.
	Logger *slog.Logger

	// OnEvent, when not nil, receives every Event, one at a time, on the
	// Host's own goroutine. It must not block.
	OnEvent func(Event)

	// MeterProvider receives the Host's metrics (MetricShardsOwned and the
	// others) and its lease supervisors' counters. nil means a no-op
	// provider.
	MeterProvider metric.MeterProvider
}

// Validate reports the first problem with c; it matches lease.ErrInvalid.
func (c Config) Validate() error {
	if err := lease.ValidateLeaseID(c.Prefix); err != nil {
		return &lease.FieldError{Field: "Prefix", Reason: err.Error()}
	}
	if c.Lease.LeaseID != "" {
		return &lease.FieldError{Field: "Lease.LeaseID", Reason: "must be empty: the host derives one per shard, got " + quote(c.Lease.LeaseID)}
	}
	lc := c.Lease
	lc.LeaseID = MemberKey(c.Prefix, c.Lease.OwnerID)
	if err := lc.Validate(); err != nil {
		return fmt.Errorf("%w (the membership lease of OwnerID %q)", err, c.Lease.OwnerID)
	}
	if err := ValidateShards(c.Prefix, c.Shards); err != nil {
		return err
	}
	if c.Store == nil {
		return &lease.FieldError{Field: "Store", Reason: "must not be nil"}
	}
	if c.directory() == nil {
		return &lease.FieldError{Field: "Directory", Reason: fmt.Sprintf("nil, and the Store (%T) is not a shard.Directory", c.Store)}
	}
	if c.Workload == nil {
		return &lease.FieldError{Field: "Workload", Reason: "must not be nil"}
	}
	if err := lease.ValidateMeta(c.Meta); err != nil {
		return err
	}
	if c.Quarantine < 0 {
		return &lease.FieldError{Field: "Quarantine", Reason: "must not be negative, got " + c.Quarantine.String()}
	}
	return c.Restart.Validate()
}

// ValidateShards reports whether shards can be the shards of a fleet under
// prefix: each one non-empty, and a valid lease ID once prefixed.
func ValidateShards(prefix string, shards []string) error {
	for _, s := range shards {
		if s == "" {
			return &lease.FieldError{Field: "Shards", Reason: "a shard name is empty"}
		}
		if err := lease.ValidateLeaseID(ShardKey(prefix, s)); err != nil {
			return &lease.FieldError{Field: "Shards", Reason: fmt.Sprintf("shard %q: %v", s, err)}
		}
	}
	return nil
}

func (c Config) directory() Directory {
	if c.Directory != nil {
		return c.Directory
	}
	d, _ := c.Store.(Directory)
	return d
}

// storeStopped returns err wrapped in actors.ErrStoreStopped when it says
// that the store stopped for good, as a LeaseSupervisor judges it: err
// matches lease.ErrStoreConfig, and the Store's (or the Directory's) Err
// method reports a stop. Otherwise it returns err.
func (c Config) storeStopped(err error) error {
	if err == nil || errors.Is(err, actors.ErrStoreStopped) || !errors.Is(err, lease.ErrStoreConfig) {
		return err
	}
	for _, s := range []any{c.Store, c.Directory} {
		if s, ok := s.(interface{ Err() error }); ok && s.Err() != nil {
			return fmt.Errorf("%w: %w", actors.ErrStoreStopped, err)
		}
	}
	return err
}

func (c Config) quarantine() time.Duration {
	switch {
	case c.Quarantine > 0:
		return c.Quarantine
	case c.Restart.Period > 0:
		return c.Restart.Period
	default:
		return time.Minute
	}
}

// Range returns n shard names: name/0 … name/<n-1>.
func Range(name string, n int) []string {
	out := make([]string, max(n, 0))
	for i := range out {
		out[i] = name + "/" + strconv.Itoa(i)
	}
	return out
}

// The lease IDs of a fleet.
const (
	membersInfix = ".members."
	shardsInfix  = ".shards."
)

// MemberKey returns the lease ID under which the instance ownerID announces
// itself in the fleet named prefix.
func MemberKey(prefix, ownerID string) string { return prefix + membersInfix + ownerID }

// ShardKey returns the lease ID that guards shard in the fleet named prefix.
func ShardKey(prefix, shard string) string { return prefix + shardsInfix + shard }
