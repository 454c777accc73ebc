package grains

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// Keys of a membership lease's metadata.
const (
	metaHost  = "host"
	metaPort  = "port"
	metaKinds = "kinds"
)

// provider is a Member seen as a cluster.ClusterProvider.
type provider Member

var _ cluster.ClusterProvider = (*provider)(nil)

// StartMember joins: it holds the membership lease, with the member's
// address and kinds in its metadata, and follows the members' leases. It
// returns once the lease is held, or with an error after
// Config.JoinTimeout.
func (p *provider) StartMember(c *cluster.Cluster) error {
	m := (*Member)(p)
	m.setup(c, false) // in case the lookup is not ours
	meta, err := memberMeta(c)
	if err != nil {
		return err
	}
	if err := m.join(meta); err != nil {
		return err
	}
	if err := m.probe(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.joinTimeout())
		defer cancel()
		return errors.Join(err, m.leaveNow(ctx))
	}
	m.follow(c)
	return nil
}

// probe takes and gives back a lock under the member's session, of a
// resource no identity has (kind ""), bounded by Config.JoinTimeout: a
// member that may not write its activations' locks (a NATS user without
// permission for Prefix+".grain.>") fails to start, with the store's
// error, instead of failing every activation later.
func (m *Member) probe() error {
	m.mu.Lock()
	locker := m.locker
	m.mu.Unlock()
	if locker == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(m.life, m.cfg.joinTimeout())
	defer cancel()
	g, err := locker.TryAcquire(ctx, grainResource("", m.ID()))
	if err != nil {
		return fmt.Errorf("grains: the member cannot take its activations' locks: %w", err)
	}
	if err := g.Release(ctx); err != nil {
		return fmt.Errorf("grains: the member cannot release its activations' locks: %w", err)
	}
	return nil
}

// StartClient follows the members' leases without joining.
func (p *provider) StartClient(c *cluster.Cluster) error {
	m := (*Member)(p)
	m.setup(c, true)
	m.follow(c)
	return nil
}

// Shutdown leaves at once: the membership lease is released, and the other
// members see it through their watch.
func (p *provider) Shutdown(bool) error {
	m := (*Member)(p)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.joinTimeout())
	defer cancel()
	return m.leaveNow(ctx)
}

// memberMeta is what a member publishes: its address and kinds.
func memberMeta(c *cluster.Cluster) (map[string]string, error) {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return nil, fmt.Errorf("grains: the member has no address (is remoting started?): %w", err)
	}
	kinds := c.GetClusterKinds()
	slices.Sort(kinds)
	meta := map[string]string{metaHost: host, metaPort: strconv.Itoa(port), metaKinds: strings.Join(kinds, ",")}
	if err := lease.ValidateMeta(meta); err != nil {
		return nil, fmt.Errorf("grains: the member's address and kinds do not fit in its lease: %w", err)
	}
	return meta, nil
}

// parseMember reads a member from its lease; ok is false for a lease that
// is not a member's.
func parseMember(h lease.Holder) (*cluster.Member, bool) {
	port, err := strconv.Atoi(h.Meta[metaPort])
	if err != nil || h.OwnerID == "" || h.Meta[metaHost] == "" {
		return nil, false
	}
	var kinds []string
	if k := h.Meta[metaKinds]; k != "" {
		kinds = strings.Split(k, ",")
	}
	return &cluster.Member{Id: h.OwnerID, Host: h.Meta[metaHost], Port: int32(port), Kinds: kinds}, true
}

// join runs the membership lease's supervisor until leaveNow or Close,
// and waits for its first term.
func (m *Member) join(meta map[string]string) error {
	id := m.ID()
	lc := m.cfg.lease(id)
	lc.LeaseID = memberKey(m.cfg.prefix(), id)
	joined := make(chan struct{})
	var once sync.Once
	var lastErr error
	var mu sync.Mutex
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lc, Store: m.store, Meta: meta, Logger: m.cfg.Logger,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			once.Do(func() { close(joined) })
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), lease.ErrLost) {
				m.log.Warn("grains: the membership lease was lost; the member's activations stop",
					"error", context.Cause(ctx))
				m.dropActivations()
			}
			return nil
		}),
		OnEvent: func(ev actors.Event) {
			if f, ok := ev.(actors.AcquisitionFailed); ok {
				mu.Lock()
				lastErr = f.Err
				mu.Unlock()
			}
		},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(m.life)
	left := make(chan struct{})
	ran := make(chan error, 1)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer close(left)
		ran <- sup.Run(ctx)
	}()
	m.mu.Lock()
	m.leave, m.left = cancel, left
	m.mu.Unlock()
	timer := time.NewTimer(m.cfg.joinTimeout())
	defer timer.Stop()
	select {
	case <-joined:
		return nil
	case err := <-ran:
		cancel()
		return fmt.Errorf("grains: cannot join: %w", err)
	case <-timer.C:
		cancel()
		<-left
		mu.Lock()
		defer mu.Unlock()
		err := fmt.Errorf("%w: grains: the membership lease %s was not granted within %v", lease.ErrUnavailable,
			lc.LeaseID, m.cfg.joinTimeout())
		if lastErr != nil {
			err = fmt.Errorf("%w (last error: %w)", err, lastErr)
		}
		return err
	}
}

// leaveNow releases the membership lease and waits for it, bounded by ctx.
func (m *Member) leaveNow(ctx context.Context) error {
	m.mu.Lock()
	leave, left := m.leave, m.left
	m.mu.Unlock()
	if leave == nil {
		return nil
	}
	leave()
	select {
	case <-left:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("grains: the membership lease was not given back: %w", ctx.Err())
	}
}

// dropActivations stops every activation of a member whose membership
// lease was lost: the others place its identities elsewhere, and stop
// routing to it. The activator takes new ones when asked.
func (m *Member) dropActivations() {
	m.mu.Lock()
	c, pid := m.c, m.activator
	m.mu.Unlock()
	if pid != nil {
		c.ActorSystem.Root.Send(pid, dropAll{})
	}
}

// follow feeds the cluster's member list from a watch of the members'
// leases until Close: a member is listed while its lease is held, and
// leaves when the store reports it released or expired.
func (m *Member) follow(c *cluster.Cluster) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		pause := 50 * time.Millisecond
		for m.life.Err() == nil {
			if m.followOnce(c) {
				pause = 50 * time.Millisecond
			}
			select {
			case <-m.life.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, 5*time.Second)
		}
	}()
}

// followOnce runs one watch; it reports whether the watch was opened.
func (m *Member) followOnce(c *cluster.Cluster) bool {
	prefix := m.cfg.prefix() + membersInfix
	current, changes, err := m.store.WatchPrefix(m.life, prefix)
	if err != nil {
		if m.life.Err() == nil {
			m.log.Warn("grains: cannot watch the members; trying again", "error", err)
		}
		return false
	}
	held := map[string]lease.Holder{}
	for _, ev := range current {
		apply(held, ev)
	}
	m.publish(c, held)
	for ev := range changes {
		if apply(held, ev) {
			m.publish(c, held)
		}
	}
	return true
}

// apply records one event of the members' watch; it reports whether the
// members or their metadata changed.
func apply(held map[string]lease.Holder, ev lease.Event) bool {
	old, was := held[ev.LeaseID]
	switch ev.Kind {
	case lease.EventHeld:
		held[ev.LeaseID] = ev.Holder
		return !was || old.OwnerID != ev.Holder.OwnerID || old.Term != ev.Holder.Term
	case lease.EventFree:
		delete(held, ev.LeaseID)
		return was
	}
	return false
}

// publish keeps the members for Get and hands them to protoactor's member
// list. (MemberList.Members is read there without its lock, so Get reads
// the Member's own copy.)
func (m *Member) publish(c *cluster.Cluster, held map[string]lease.Holder) {
	members := make([]*cluster.Member, 0, len(held))
	for _, h := range held {
		if mem, ok := parseMember(h); ok {
			members = append(members, mem)
		}
	}
	slices.SortFunc(members, func(a, b *cluster.Member) int { return strings.Compare(a.Id, b.Id) })
	m.mu.Lock()
	m.members = members
	m.mu.Unlock()
	c.MemberList.UpdateClusterTopology(slices.Clone(members))
}

// Members returns the members the Member's watch shows now, by ID: those
// whose membership lease is held.
func (m *Member) Members() []*cluster.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}
