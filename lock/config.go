package lock

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"

	"github.com/asterforge/aster/lease"
)

// DefaultCloseTimeout bounds Close when its context has no deadline.
const DefaultCloseTimeout = 10 * time.Second

// Config configures a Locker. The zero value works: a random node ID, locks
// named by their resource alone, the lease defaults (TTL 30 s, renewal every
// 10 s), and an actor system of the Locker's own. Config is taken by value
// and never modified.
type Config struct {
	// OwnerID names this process, for people, in every lock it holds (a
	// pod name, for example): printable ASCII without spaces, at most 255
	// bytes. "" means lease.NewOwnerID(). Every guard is a term of its own
	// (lease.NewTerm), so two guards never share an identity, even across
	// restarts of a process with the same OwnerID.
	OwnerID string

	// Prefix is prepended to every resource to make its lease ID (for
	// example "lock." to keep locks apart from singleton leases in the same
	// bucket). The result must be a valid lease ID (lease.ValidateLeaseID).
	Prefix string

	// TTL is the default lease TTL of a lock; WithTTL overrides it per
	// lock. 0 means lease.DefaultTTL (30 s). Under a session (Session) it
	// is the session's TTL.
	TTL time.Duration

	// Session, when true, holds locks under one session of the Locker's,
	// as etcd's concurrency.Mutex does: a lease of its own (key
	// Prefix+"session."+term), renewed by one watchdog whatever the number
	// of locks, with each lock key written once, without a TTL, naming
	// it. A lock is then valid for as long as the session is, its token
	// is still its own key's revision, and contenders take it once the
	// session has ended (released, expired, or deleted by hand and the
	// store's wait for vanished keys passed). The session is opened by the
	// first acquisition that needs it, replaced when it is lost (which
	// ends every lock under it), and released by Close. Locks acquired
	// WithOwnLease or WithTTL keep a lease (and a watchdog) of their own.
	// The store must be a lease.SessionStore (natsstore and leasetest's
	// stores are).
	Session bool

	// RenewInterval, SafetyMargin and StopTimeout are those of
	// lease.Config, with its defaults and normalisation, applied to each
	// lock's TTL: the watchdog renews every min(RenewInterval, TTL/2), and
	// gives up at TTL - SafetyMargin - StopTimeout after the last success.
	RenewInterval time.Duration
	SafetyMargin  time.Duration
	StopTimeout   time.Duration

	// RetryInterval is the longest pause between two polls of a waiting
	// Acquire, which is otherwise woken by the store's watch (when the store
	// is a lease.Watcher). Polls back off exponentially with jitter up to
	// it. 0 means lease.DefaultStandbyRetryInterval (5 s); WithRetryInterval
	// overrides it per call.
	RetryInterval time.Duration

	// System is the actor system the watchdogs run in. nil means a quiet
	// system of the Locker's own, started when the first watchdog is due
	// (never, when every lock is released sooner) and shut down by Close;
	// a given system is not shut down.
	System *actor.ActorSystem

	// Logger receives the Locker's and the watchdogs' records. nil discards
	// them.
	Logger *slog.Logger

	// OnEvent, when not nil, receives the lock's events (Event):
	// LockAcquired, LockReleased and LockNotReleased from the Locker and its
	// guards, LockRenewed, LockRenewalFailed and LockPoisoned from the
	// watchdogs, on their goroutines. It must not block.
	OnEvent func(Event)

	// MeterProvider receives the lock instruments: the locks held
	// (MetricHeld) and how long acquisitions took (MetricWait). nil means a
	// no-op provider.
	MeterProvider metric.MeterProvider
}

// leaseConfig returns the lease.Config of one lock.
func (c Config) leaseConfig(leaseID, owner string, ttl, retry time.Duration) lease.Config {
	if ttl <= 0 {
		ttl = c.TTL
	}
	if retry <= 0 {
		retry = c.RetryInterval
	}
	return lease.Config{
		LeaseID: leaseID, OwnerID: owner, TTL: ttl, RenewInterval: c.RenewInterval,
		StandbyRetryInterval: retry, SafetyMargin: c.SafetyMargin, StopTimeout: c.StopTimeout,
	}
}

// Validate reports the first problem with c; it matches lease.ErrInvalid.
func (c Config) Validate() error {
	if c.OwnerID != "" {
		if err := lease.ValidateOwnerID(c.OwnerID); err != nil {
			return err
		}
	}
	if c.Prefix != "" {
		if err := lease.ValidateLeaseID(c.Prefix + "x"); err != nil {
			return &lease.FieldError{Field: "Prefix", Reason: "with a resource it must make a valid lease ID: " + err.Error()}
		}
	}
	if c.RetryInterval < 0 {
		return &lease.FieldError{Field: "RetryInterval", Reason: "must not be negative, got " + c.RetryInterval.String()}
	}
	return c.leaseConfig("x", "x", 0, 0).Validate()
}

// Option changes one Acquire or TryAcquire call.
type Option func(*options)

type options struct {
	ttl   time.Duration
	retry time.Duration
	own   bool
}

// WithTTL sets the lease TTL of this lock instead of Config.TTL. The
// Config's margins must fit it (see lease.Config.Validate); a store may
// have a floor of its own (natsstore: 1 s). Under a Config.Session, the
// lock gets a lease of its own, as with WithOwnLease.
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl, o.own = ttl, true } }

// WithOwnLease gives this lock a lease of its own, renewed by a watchdog of
// its own, even when Config.Session holds the Locker's other locks under a
// session: a lock that must expire independently, or that Extend may
// change.
func WithOwnLease() Option { return func(o *options) { o.own = true } }

// WithRetryInterval sets the longest pause between polls of this Acquire
// instead of Config.RetryInterval.
func WithRetryInterval(d time.Duration) Option { return func(o *options) { o.retry = d } }
