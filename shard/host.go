package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/leasehold"
)

// Host is one instance's part in a sharded fleet: it announces the instance
// as a member, watches the other members and the shards' holders, computes
// the placement (Place), and runs one actors.LeaseSupervisor for each shard
// placed on it; it hands over the shards placed elsewhere. Run it on every
// instance with the same Prefix and Shards and its own OwnerID.
//
// It is safe for concurrent use; Status, Drain and SetShards may be called
// from any goroutine.
type Host struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	running atomic.Bool

	mu     sync.Mutex
	shards []string                           // the declared shards, sorted
	sups   map[string]*actors.LeaseSupervisor // one per shard, made the first time it runs here

	status atomic.Pointer[snapshot]
	ref    atomic.Pointer[hostRef] // the running actor
	bg     sync.WaitGroup          // the watch and handover goroutines
}

// hostRef is the running Host actor.
type hostRef struct {
	sys *actor.ActorSystem
	pid *actor.PID
}

// snapshot is the Status the actor last published, and the supervisors of
// the shards it runs, whose own status Status reads live.
type snapshot struct {
	st    Status
	local map[string]*actors.LeaseSupervisor
}

// NewHost validates cfg and returns a Host. Errors match lease.ErrInvalid.
func NewHost(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, log: actorsys.Logger(cfg.Logger), shards: unique(cfg.Shards),
		sups: map[string]*actors.LeaseSupervisor{}}
	h.status.Store(&snapshot{st: Status{OwnerID: cfg.Lease.OwnerID, Prefix: cfg.Prefix, Since: time.Now()}})
	m, err := newMetrics(cfg.MeterProvider, cfg.Prefix, h.Status)
	if err != nil {
		return nil, err
	}
	h.metrics = m
	return h, nil
}

// Run takes part in the fleet until ctx is done: it joins (writes its
// membership lease), runs the shards placed on it, and follows the fleet as
// members come and go. When ctx is done it leaves gracefully, as Drain
// does, and returns once everything it started has stopped.
//
// It returns nil after a clean shutdown; ErrAlreadyRunning while another
// Run is under way; an error matching ErrHandoverFailed for shards not
// handed over cleanly (their leases expire); lease.ErrInvalid when the
// store refused the fleet's watch; actors.ErrStoreStopped or lease.ErrClosed
// when the store stopped for good or was closed: exit, and let the process
// be restarted.
func (h *Host) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer h.running.Store(false)

	sys := actorsys.New(h.cfg.Logger)
	defer sys.Shutdown()
	fatal := make(chan error, 1)
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newHostActor(h, fatal)
	}))
	ref := &hostRef{sys: sys.ActorSystem, pid: pid}
	h.ref.Store(ref)

	var err error
	select {
	case <-ctx.Done():
	case err = <-fatal:
	}
	budget := h.shutdownBudget()
	reply := make(chan error, 1)
	sys.Root.Send(pid, drainRequest{reply: reply})
	t := time.NewTimer(budget)
	select {
	case derr := <-reply:
		err = errors.Join(err, derr)
	case <-t.C:
		err = errors.Join(err, fmt.Errorf("%w: the shards were not handed over within %v", ErrHandoverFailed, budget))
	}
	t.Stop()
	h.ref.Store(nil)
	if !actorsys.StopAndWait(sys.ActorSystem, pid, budget) {
		err = errors.Join(err, fmt.Errorf("%w: the host did not stop within %v", ErrHandoverFailed, budget))
	}
	if !waitGroup(&h.bg, budget) {
		h.log.Warn("a watch of the fleet did not end within the shutdown budget", "owner_id", h.cfg.Lease.OwnerID)
	}
	h.setState(StateStopped)
	return err
}

// Drain hands every shard this instance runs over to the other members and
// leaves the fleet, for a deploy: it releases its membership lease, then
// stops each shard's workload (its context is cancelled with
// actors.ErrResigned) and releases the shard's lease. The instance stays
// out of the fleet until Run returns; Run then returns at once.
//
// It returns when every shard has been handed over: nil, or an error
// matching ErrHandoverFailed that says which were not handed over cleanly;
// ErrInactive when Run does not run; ctx's cause when ctx ends first (the
// handover goes on).
func (h *Host) Drain(ctx context.Context) error {
	ref := h.ref.Load()
	if ref == nil {
		return ErrInactive
	}
	reply := make(chan error, 1)
	ref.sys.Root.Send(ref.pid, drainRequest{reply: reply})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("shard: drain: %w", context.Cause(ctx))
	}
}

// SetShards replaces the shards of the fleet, as seen by this instance. A
// shard no longer named is stopped where it runs; a new one is placed. Give
// every instance the same set: until they agree, their placements differ,
// which costs balance, never safety. It may be called before Run.
func (h *Host) SetShards(shards []string) error {
	if err := ValidateShards(h.cfg.Prefix, shards); err != nil {
		return err
	}
	h.mu.Lock()
	h.shards = unique(shards)
	h.mu.Unlock()
	if ref := h.ref.Load(); ref != nil {
		ref.sys.Root.Send(ref.pid, shardsChanged{})
	}
	return nil
}

// Shards returns the shards of the fleet as this instance knows them,
// sorted.
func (h *Host) Shards() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.shards)
}

// Status returns this instance's state and its view of the fleet as last
// computed, with each local shard supervisor's status read now.
func (h *Host) Status() Status {
	snap := h.status.Load()
	st := snap.st
	st.Members = slices.Clone(st.Members)
	st.Shards = slices.Clone(st.Shards)
	st.Owned = 0
	for i := range st.Shards {
		if sup := snap.local[st.Shards[i].Name]; sup != nil {
			ls := sup.Status()
			st.Shards[i].Local = &ls
			if ls.State == actors.StateLeading {
				st.Owned++
			}
		}
	}
	return st
}

// setState publishes a new state without the actor (before and after it).
func (h *Host) setState(s State) {
	old := h.status.Load()
	next := *old
	next.st.State, next.st.Since = s, time.Now()
	next.local = nil
	h.status.Store(&next)
}

// forward hands a lease supervisor's event to the running Host actor.
func (h *Host) forward(r leaseReport) {
	if ref := h.ref.Load(); ref != nil {
		ref.sys.Root.Send(ref.pid, r)
	}
}

// supervisor returns the shard's LeaseSupervisor, made the first time: one
// per shard for the Host's life (across Runs), so that a workload that has
// not stopped keeps any new term of its shard from starting in this
// process.
func (h *Host) supervisor(shard string) (*actors.LeaseSupervisor, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sup := h.sups[shard]; sup != nil {
		return sup, nil
	}
	w := h.cfg.Workload(shard)
	if w == nil {
		return nil, fmt.Errorf("shard: Workload(%q) returned nil", shard)
	}
	lc := h.cfg.Lease
	lc.LeaseID = ShardKey(h.cfg.Prefix, shard)
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lc, Store: h.cfg.Store, Workload: w, Meta: h.cfg.Meta, Restart: h.cfg.Restart,
		Logger: h.subLogger("shard", shard), MeterProvider: h.cfg.MeterProvider,
		OnEvent: func(ev actors.Event) { h.forward(leaseReport{shard: shard, ev: ev}) },
	})
	if err != nil {
		return nil, err
	}
	h.sups[shard] = sup
	return sup, nil
}

// subLogger returns the Logger with one attribute, or nil.
func (h *Host) subLogger(key, value string) *slog.Logger {
	if h.cfg.Logger == nil {
		return nil
	}
	return h.cfg.Logger.With(key, value)
}

// opTimeout bounds one store call.
func (h *Host) opTimeout() time.Duration { return leasehold.OpTimeout(h.cfg.Lease) }

// handoverBudget bounds one shard's handover: the workload's stop and the
// release, with slack.
func (h *Host) handoverBudget() time.Duration {
	return 2*h.opTimeout() + 2*h.cfg.Lease.EffectiveStopTimeout() + time.Second
}

// shutdownBudget bounds a graceful shutdown: the membership's release, then
// every handover (they run at once).
func (h *Host) shutdownBudget() time.Duration { return 2 * h.handoverBudget() }

// waitGroup waits for wg at most timeout and reports whether it finished.
func waitGroup(wg *sync.WaitGroup, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
