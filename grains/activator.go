package grains

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
)

// activatorName is the name of every member's activator actor, to which
// lookups send their cluster.ActivationRequest.
const activatorName = "aster-grains"

// host is what the activator needs of its Member.
type host struct {
	locker  *lock.Locker
	props   func(kind string) (*actor.Props, bool)
	timeout time.Duration // bounds an acquisition of an identity's lock
	release time.Duration // bounds a release
	log     *slog.Logger
	life    context.Context // cancelled when the Member closes
	bg      *sync.WaitGroup // the acquisitions and releases in flight
	failed  *sync.Map       // identity key → why its last acquisition failed (Member.ask reports it)
}

// activator runs a member's activations: it takes an identity's lock under
// the member's session, spawns the grain as its child, stops it when the
// lock is lost, and releases the lock once the grain has stopped.
type activator struct {
	h       *host
	acts    map[string]*entry       // by identity key
	byPID   map[string]*entry       // by the grain's PID.Id
	pending map[string][]*actor.PID // requesters waiting for an acquisition, by key
	running map[string]bool         // acquisitions under way, by key
	closing bool
	drained []chan struct{} // answered when the last grain has stopped
}

// entry is one activation.
type entry struct {
	key  string
	a    *Activation
	pid  *actor.PID
	stop func() bool // stops the lost-watch (context.AfterFunc)
}

// Messages of the activator (local only).
type (
	// acquired is the outcome of an acquisition.
	acquired struct {
		ci  *cluster.ClusterIdentity
		g   *lock.Guard
		err error
	}
	// lostLock: an activation's lock was lost or released.
	lostLock struct{ e *entry }
	// drain stops every activation and takes no more; done is closed when
	// every grain has stopped.
	drain struct{ done chan struct{} }
	// dropAll stops every activation (the membership lease was lost).
	dropAll struct{}
)

func newActivator(h *host) *activator {
	return &activator{h: h, acts: map[string]*entry{}, byPID: map[string]*entry{}, pending: map[string][]*actor.PID{},
		running: map[string]bool{}}
}

func (ac *activator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *cluster.ActivationRequest:
		ac.request(c, m)
	case acquired:
		ac.acquired(c, m)
	case lostLock:
		if ac.acts[m.e.key] == m.e {
			c.Stop(m.e.pid) // the gate refuses its messages already
		}
	case *actor.Terminated:
		ac.terminated(m.Who)
	case drain:
		ac.drain(c, m.done)
	case dropAll:
		for _, e := range ac.byPID {
			c.Stop(e.pid)
		}
	}
}

// request answers a lookup: the activation's PID if there is one, or once
// an acquisition (started now, or already under way) ends.
func (ac *activator) request(c actor.Context, m *cluster.ActivationRequest) {
	ci := m.ClusterIdentity
	if ci == nil {
		c.Respond(&cluster.ActivationResponse{Failed: true})
		return
	}
	if _, ok := ac.h.props(ci.Kind); !ok || ac.closing {
		c.Respond(&cluster.ActivationResponse{Failed: true})
		return
	}
	key := ci.AsKey()
	if e := ac.acts[key]; e != nil {
		if _, err := e.a.Token(); err == nil {
			c.Respond(&cluster.ActivationResponse{Pid: e.pid})
			return
		}
		// Lost and stopping: the next activation waits for its lock,
		// which this member's Locker hands over once released.
	}
	if s := c.Sender(); s != nil {
		ac.pending[key] = append(ac.pending[key], s)
	}
	if ac.running[key] {
		return // an acquisition is under way
	}
	ac.running[key] = true
	ac.acquire(c, ci)
}

// acquire takes the identity's lock in the background, bounded by the
// host's timeout.
func (ac *activator) acquire(c actor.Context, ci *cluster.ClusterIdentity) {
	h, root, self := ac.h, c.ActorSystem().Root, c.Self()
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		ctx, cancel := context.WithTimeout(h.life, h.timeout)
		defer cancel()
		g, err := h.locker.Acquire(ctx, grainResource(ci.Kind, ci.Identity))
		root.Send(self, acquired{ci: ci, g: g, err: err})
	}()
}

// acquired starts the activation whose lock was taken, or tells its
// requesters that it could not be.
func (ac *activator) acquired(c actor.Context, m acquired) {
	key := m.ci.AsKey()
	waiting := ac.pending[key]
	delete(ac.pending, key)
	delete(ac.running, key)
	answer := func(resp *cluster.ActivationResponse) {
		for _, p := range waiting {
			c.Send(p, resp)
		}
	}
	if m.err != nil {
		ac.h.log.Debug("grains: no activation", "grain", key, "error", m.err)
		ac.h.failed.Store(key, m.err)
		answer(&cluster.ActivationResponse{Failed: true})
		return
	}
	ac.h.failed.Delete(key)
	props, ok := ac.h.props(m.ci.Kind)
	if ac.closing || !ok || ac.acts[key] != nil {
		// Closing, or the previous activation has not stopped yet (a lock
		// of this Locker handed over early cannot happen: the old guard
		// is released only after its grain stopped).
		ac.release(m.g)
		answer(&cluster.ActivationResponse{Failed: true})
		return
	}
	a := &Activation{g: m.g, kind: m.ci.Kind, id: m.ci.Identity}
	pid := c.SpawnPrefix(activationProps(props, m.ci, a), escape(m.ci.Identity))
	e := &entry{key: key, a: a, pid: pid}
	root, self := c.ActorSystem().Root, c.Self()
	e.stop = context.AfterFunc(m.g.Context(), func() { root.Send(self, lostLock{e: e}) })
	ac.acts[key], ac.byPID[pid.Id] = e, e
	ac.h.log.Debug("grains: activated", "grain", key, "token", uint64(m.g.Tenure().Token))
	answer(&cluster.ActivationResponse{Pid: pid})
}

// terminated releases the lock of a grain that stopped.
func (ac *activator) terminated(who *actor.PID) {
	e := ac.byPID[who.Id]
	if e == nil {
		return
	}
	delete(ac.byPID, who.Id)
	if ac.acts[e.key] == e {
		delete(ac.acts, e.key)
	}
	e.stop()
	ac.release(e.a.g)
	if len(ac.byPID) == 0 {
		for _, d := range ac.drained {
			close(d)
		}
		ac.drained = nil
	}
}

// release gives a lock back in the background: it is free for the next
// activation once the grain has stopped.
func (ac *activator) release(g *lock.Guard) {
	h := ac.h
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), h.release)
		defer cancel()
		if err := g.Release(ctx); err != nil && !errors.Is(err, lease.ErrLost) && !errors.Is(err, lease.ErrClosed) {
			h.log.Warn("grains: could not release an activation's lock; it is freed with the session",
				"lease_id", g.Resource(), "error", err)
		}
	}()
}

// drain stops every grain; done is closed once they have all stopped.
func (ac *activator) drain(c actor.Context, done chan struct{}) {
	ac.closing = true
	for key, waiting := range ac.pending {
		for _, p := range waiting {
			c.Send(p, &cluster.ActivationResponse{Failed: true})
		}
		delete(ac.pending, key)
	}
	if len(ac.byPID) == 0 {
		close(done)
		return
	}
	ac.drained = append(ac.drained, done)
	for _, e := range ac.byPID {
		c.Stop(e.pid)
	}
}
