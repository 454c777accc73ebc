package grains

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
)

// Get returns the PID of the identity's activation, activating it if it
// has none: it reads who holds the identity's lock, asks that member
// first (it answers with its activation), and otherwise the members that
// host the kind in rendezvous order, each of which takes the lock before
// it activates (waiting, within Config.ActivationTimeout, for a previous
// activation's lock). It fails with ErrUnknownKind when no member hosts the
// kind, ErrNoActivation when none answered with an activation (with why
// this member could not take the identity's lock, when it was asked), and
// the store's error when the lock cannot be read.
func (m *Member) Get(ctx context.Context, kind, identity string) (*actor.PID, error) {
	c := m.cluster()
	if c == nil {
		return nil, ErrNotStarted
	}
	if err := validGrainKey(m.cfg.prefix(), kind, identity); err != nil {
		return nil, fmt.Errorf("grains: %s/%s: %w", kind, identity, err)
	}
	var hosts []*cluster.Member
	members := m.Members()
	for _, mem := range members {
		if mem.HasKind(kind) {
			hosts = append(hosts, mem)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w: %q (%d members)", ErrUnknownKind, kind, len(members))
	}
	obs, err := m.store.Read(ctx, grainKey(m.cfg.prefix(), kind, identity))
	if err != nil {
		return nil, fmt.Errorf("grains: %s/%s: read its lock: %w", kind, identity, err)
	}
	holder := ""
	if obs.Held {
		holder = obs.Holder.OwnerID
	}
	ci := cluster.NewClusterIdentity(identity, kind)
	var errs []error
	for _, mem := range rank(hosts, ci.AsKey(), holder) {
		pid, err := m.ask(ctx, c, mem, ci)
		if pid != nil {
			return pid, nil
		}
		errs = append(errs, fmt.Errorf("member %s: %w", mem.Id, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %s/%s: %w", ErrNoActivation, kind, identity, errors.Join(errs...))
}

// ask asks one member's activator for the identity's activation.
func (m *Member) ask(ctx context.Context, c *cluster.Cluster, mem *cluster.Member, ci *cluster.ClusterIdentity) (*actor.PID, error) {
	wait := min(time.Until(deadline(ctx)), m.askTimeout())
	if wait <= 0 {
		return nil, ctx.Err()
	}
	f := c.ActorSystem.Root.RequestFuture(actor.NewPID(mem.Address(), activatorName),
		&cluster.ActivationRequest{ClusterIdentity: ci}, wait)
	res, err := f.Result()
	if err == nil {
		if r, ok := res.(*cluster.ActivationResponse); ok && !r.Failed && r.Pid != nil {
			return r.Pid, nil
		}
		err = errors.New("no activation")
	}
	if why, ok := m.failed.Load(ci.AsKey()); ok && mem.Id == m.ID() {
		err = fmt.Errorf("%w (this member's last attempt to take the identity's lock failed: %w)", err, why.(error))
	}
	return nil, err
}

// askTimeout bounds one member's answer: half a TTL (at least 250 ms),
// so that a dead member still listed, which may not answer at all, costs a
// lookup that much before it asks the next member. A member that waits
// for the identity's lock longer goes on waiting after the lookup moved
// on, and answers the next lookup with its activation.
func (m *Member) askTimeout() time.Duration {
	return max(m.cfg.lease("x").EffectiveTTL()/2, 250*time.Millisecond)
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// rank orders the members to ask for key: the lock's holder first, when it
// is one of them, then the others by rendezvous hash of their ID and key.
func rank(hosts []*cluster.Member, key, holder string) []*cluster.Member {
	out := slices.Clone(hosts)
	score := func(mem *cluster.Member) uint64 {
		if mem.Id == holder {
			return ^uint64(0)
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(mem.Id))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(key))
		return mix(h.Sum64())
	}
	slices.SortStableFunc(out, func(a, b *cluster.Member) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return out
}

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Request sends msg to the identity's activation and returns its answer,
// trying again (with a fresh lookup) when the activation it reached is no
// longer valid, has stopped or does not answer in time, until ctx ends. It
// fails at once with ErrUnknownKind; otherwise, at ctx's end, with an error
// matching ctx.Err() and the last failure. A message may reach an
// activation and have effect without its answer arriving: a retried call
// can be handled twice, by this activation or the next; make handlers
// idempotent, and fence their writes.
func (m *Member) Request(ctx context.Context, kind, identity string, msg any) (any, error) {
	c := m.cluster()
	if c == nil {
		return nil, ErrNotStarted
	}
	pause := 10 * time.Millisecond
	var last error
	for {
		pid, err := m.pid(ctx, c, kind, identity)
		if errors.Is(err, ErrUnknownKind) {
			return nil, err
		}
		if err == nil {
			res, rerr := c.ActorSystem.Root.RequestFuture(pid, msg, time.Until(deadline(ctx))).Result()
			if rerr == nil {
				return res, nil
			}
			c.PidCache.RemoveByValue(identity, kind, pid)
			err = rerr
			if errors.Is(rerr, actor.ErrDeadLetter) || errors.Is(rerr, remote.ErrDeadLetter) {
				err = fmt.Errorf("%w (%v)", ErrNotActive, rerr)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("grains: request %s/%s: %w (last: %w)", kind, identity, ctx.Err(), last)
		case <-time.After(pause):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// pid returns the cached PID of an identity, or looks it up.
func (m *Member) pid(ctx context.Context, c *cluster.Cluster, kind, identity string) (*actor.PID, error) {
	if pid, ok := c.PidCache.Get(identity, kind); ok && pid != nil {
		return pid, nil
	}
	lctx, cancel := context.WithTimeout(ctx, m.cfg.activationTimeout())
	defer cancel()
	pid, err := m.Get(lctx, kind, identity)
	if err != nil {
		return nil, err
	}
	c.PidCache.Set(identity, kind, pid)
	return pid, nil
}
