package grains

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
)

// Member is one process's part in a cluster of virtual actors: it is both
// the cluster provider (Provider: membership by a lease per member and a
// watch of the members' leases) and the identity lookup (Lookup: each
// activation holds a lock under the member's session). Give both to
// cluster.Configure:
//
//	m, err := grains.New(store, grains.Config{Prefix: "shop", TTL: 10 * time.Second})
//	cfg := cluster.Configure("shop", m.Provider(), m.Lookup(), remote.Configure("10.0.0.7", 8090),
//		cluster.WithKinds(cluster.NewKind("counter", counterProps)))
//	c := cluster.New(actor.NewActorSystem(), cfg)
//	if err := grains.StartMember(c); err != nil { ... }
//	defer grains.StopMember(context.Background(), c)
//
// A Member serves one cluster.Cluster, once.
type Member struct {
	store Store
	cfg   Config
	log   *slog.Logger

	life   context.Context // cancelled by Close
	cancel context.CancelFunc
	bg     sync.WaitGroup // acquisitions, releases, the membership and its watch

	mu        sync.Mutex
	c         *cluster.Cluster
	id        string
	locker    *lock.Locker      // nil for a client
	activator *actor.PID        // nil for a client
	members   []*cluster.Member // as the watch last showed them
	leave     context.CancelFunc
	left      chan struct{} // closed when the membership lease is given back
	failed    sync.Map      // identity key → why its last acquisition here failed
	stopOnce  sync.Once     // StopMember's stop of the cluster
	closeOnce sync.Once
	closeErr  error
}

// New returns a Member over store. It does not touch the store: the
// cluster starts it (StartMember or StartClient).
func New(store Store, cfg Config) (*Member, error) {
	if store == nil {
		return nil, &lease.FieldError{Field: "store", Reason: "must not be nil"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	return &Member{store: store, cfg: cfg, log: actorsys.Logger(cfg.Logger), life: life, cancel: cancel}, nil
}

// Provider returns the Member as a cluster.ClusterProvider.
func (m *Member) Provider() cluster.ClusterProvider { return (*provider)(m) }

// Lookup returns the Member as a cluster.IdentityLookup.
func (m *Member) Lookup() cluster.IdentityLookup { return (*lookup)(m) }

// ID returns the member's ID (its actor system's), once started.
func (m *Member) ID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id
}

// StartMember starts c as a member and returns the error that
// cluster.Cluster.StartMember panics with (a store it cannot reach within
// Config.JoinTimeout, a bucket it may not write, metadata that does not
// fit in a lease).
func StartMember(c *cluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("grains: the cluster did not start: %v", r)
		}
	}()
	c.StartMember()
	return nil
}

// StopMember stops a member that StartMember started: it closes its Member
// (Member.Close, bounded by ctx), then stops the cluster's gossip, remoting
// and actor system, without cluster.Cluster.Shutdown's two-second sleep.
// It is idempotent.
func StopMember(ctx context.Context, c *cluster.Cluster) error {
	p, ok := c.Config.ClusterProvider.(*provider)
	if !ok {
		return errors.New("grains: the cluster's provider is not a grains Member")
	}
	m := (*Member)(p)
	err := m.Close(ctx)
	m.stopOnce.Do(func() {
		c.Gossip.Shutdown()
		c.Remote.Shutdown(false)
		c.ActorSystem.Shutdown()
	})
	return err
}

// setup binds m to its cluster; a client has no Locker and no activator.
func (m *Member) setup(c *cluster.Cluster, client bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		return
	}
	m.c, m.id = c, c.ActorSystem.ID
	if client {
		return
	}
	lc := m.cfg.lease(m.id)
	locker, err := lock.New(m.store, lock.Config{OwnerID: m.id, Prefix: m.cfg.prefix() + ".", Session: true,
		TTL: lc.TTL, RenewInterval: lc.RenewInterval, SafetyMargin: lc.SafetyMargin, StopTimeout: lc.StopTimeout,
		Logger: m.cfg.Logger})
	if err != nil { // cannot happen with a validated Config and a SessionStore
		m.log.Error("grains: cannot make the member's Locker", "error", err)
		return
	}
	m.locker = locker
	h := &host{locker: locker, timeout: m.cfg.activationTimeout(), release: lc.EffectiveTTL(), log: m.log,
		life: m.life, bg: &m.bg, failed: &m.failed,
		props: func(kind string) (*actor.Props, bool) {
			k, ok := c.TryGetClusterKind(kind)
			if !ok || k == nil {
				return nil, false
			}
			return k.Props, true
		}}
	pid, err := c.ActorSystem.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newActivator(h) }),
		activatorName)
	if err != nil {
		m.log.Error("grains: cannot start the activator", "error", err)
		return
	}
	m.activator = pid
}

// drain stops every activation, bounded by ctx, and closes the Locker,
// which releases the session (freeing every lock under it at once).
func (m *Member) drain(ctx context.Context) error {
	m.mu.Lock()
	c, pid, locker := m.c, m.activator, m.locker
	m.activator, m.locker = nil, nil // a second drain has nothing to do
	m.mu.Unlock()
	var errs []error
	if pid != nil {
		done := make(chan struct{})
		c.ActorSystem.Root.Send(pid, drain{done: done})
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("grains: activations still running at close: %w", ctx.Err()))
		}
		actorsys.StopAndWait(c.ActorSystem, pid, time.Second)
	}
	if locker != nil {
		if err := locker.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close leaves the cluster at once (the membership lease is released),
// stops every activation, releases the session and its locks, and waits for
// everything the Member started, bounded by ctx (10 s without a deadline).
// It is idempotent. Call it after cluster.Cluster.Shutdown(false), or
// instead of relying on Shutdown(true)'s calls of Provider and Lookup.
func (m *Member) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, lock.DefaultCloseTimeout)
			defer cancel()
		}
		errLeave := m.leaveNow(ctx)
		errDrain := m.drain(ctx)
		m.cancel()
		done := make(chan struct{})
		go func() { m.bg.Wait(); close(done) }()
		var errWait error
		select {
		case <-done:
		case <-ctx.Done():
			errWait = fmt.Errorf("grains: background work still running at close: %w", ctx.Err())
		}
		m.closeErr = errors.Join(errLeave, errDrain, errWait)
	})
	return m.closeErr
}

// lookup is a Member seen as a cluster.IdentityLookup.
type lookup Member

var _ cluster.IdentityLookup = (*lookup)(nil)

func (l *lookup) Setup(c *cluster.Cluster, _ []string, client bool) { (*Member)(l).setup(c, client) }

// Get returns the PID of the identity's activation, activating it on a
// member if it has none, or nil when it cannot within
// Config.ActivationTimeout (cluster.Context then tries again).
func (l *lookup) Get(ci *cluster.ClusterIdentity) *actor.PID {
	m := (*Member)(l)
	ctx, cancel := context.WithTimeout(m.life, m.cfg.activationTimeout())
	defer cancel()
	pid, err := m.Get(ctx, ci.Kind, ci.Identity)
	if err != nil {
		m.log.Debug("grains: lookup failed", "kind", ci.Kind, "identity", ci.Identity, "error", err)
		return nil
	}
	return pid
}

// RemovePid forgets a PID that turned out dead; the next Get asks again.
func (l *lookup) RemovePid(ci *cluster.ClusterIdentity, pid *actor.PID) {
	if c := (*Member)(l).cluster(); c != nil {
		c.PidCache.RemoveByValue(ci.Identity, ci.Kind, pid)
	}
}

// Shutdown stops the member's activations and releases their locks.
func (l *lookup) Shutdown() {
	m := (*Member)(l)
	ctx, cancel := context.WithTimeout(context.Background(), lock.DefaultCloseTimeout)
	defer cancel()
	if err := m.drain(ctx); err != nil {
		m.log.Warn("grains: shutdown", "error", err)
	}
}

func (m *Member) cluster() *cluster.Cluster {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}
