package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// Timing of the Host actor.
const (
	// settle is how long the actor lets changes accumulate before it
	// places the shards again: a burst of watch events costs one placement.
	settle = 10 * time.Millisecond
	// maxBatch bounds the events the watch goroutine hands over at once.
	maxBatch = 512
	// resignHoldOff keeps a resigned shard supervisor from competing again
	// before it is stopped.
	resignHoldOff = time.Hour
	// Bounds of the pause before the fleet's watch is opened again.
	rewatchMin = 100 * time.Millisecond
	rewatchMax = 5 * time.Second
)

// phase is where a local shard supervisor is.
type phase uint8

const (
	phaseRunning   phase = iota // competing for, or leading, the shard
	phaseResigning              // Resign was called; it stops afterwards
	phaseStopping               // told to stop
)

// local is one shard supervisor (or the membership's) this Host runs.
type local struct {
	shard string // "" for the membership
	sup   *actors.LeaseSupervisor
	pid   *actor.PID
	phase phase
	token lease.Token // the last term's
	err   error       // why the handover was not clean
}

// Messages of the Host actor.
type (
	dirSnapshot struct {
		gen uint64
		evs []lease.Event
	}
	dirEvents struct {
		gen uint64
		evs []lease.Event
	}
	dirEnded struct {
		gen uint64
		err error
	}
	reconcileTick struct{}
	sweepTick     struct{}
	recheckTick   struct{}
	rewatchTick   struct{ gen uint64 }
	leaseReport   struct {
		shard  string
		member bool
		ev     actors.Event
	}
	resigned struct {
		l   *local
		err error
	}
	drainRequest  struct{ reply chan<- error }
	shardsChanged struct{}
)

// hostActor is a Host's actor: it owns the view, the placement and the
// local supervisors, which are its children.
type hostActor struct {
	h     *Host
	fatal chan<- error
	self  *actor.PID
	sys   *actor.ActorSystem
	owner string

	view        *view
	ready       bool // the first snapshot has arrived
	watchCancel context.CancelFunc
	watchGen    uint64
	rewatch     time.Duration

	shards  []string
	plan    map[string]string
	members map[string]map[string]string // OwnerID -> Meta, as last reported

	local       map[string]*local // by shard
	byPID       map[string]*local // by PID id, with the membership
	member      *local
	joined      bool
	draining    bool
	drainWait   []chan<- error
	drainErrs   []error
	quarantined map[string]time.Time

	state           State
	since           time.Time
	balanced        bool
	unbalancedSince time.Time
	movedIn         uint64
	handedOver      uint64
	lastErr         error
	lastErrAt       time.Time

	settleArmed  bool
	sweep        *time.Timer
	settleTimer  *time.Timer
	rewatchTimer *time.Timer
	recheckTimer *time.Timer // when an unproven member stops counting
	recheckAt    time.Time
}

func newHostActor(h *Host, fatal chan<- error) *hostActor {
	return &hostActor{h: h, fatal: fatal, owner: h.cfg.Lease.OwnerID,
		view:    newView(h.cfg.Prefix, h.cfg.Lease.EffectiveTTL()),
		members: map[string]map[string]string{}, local: map[string]*local{}, byPID: map[string]*local{},
		quarantined: map[string]time.Time{}, since: time.Now(), unbalancedSince: time.Now(), rewatch: rewatchMin}
}

// Receive implements actor.Actor.
func (a *hostActor) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		a.self, a.sys = c.Self(), c.ActorSystem()
		a.h.ref.Store(&hostRef{sys: a.sys, pid: a.self}) // before any supervisor reports
		a.shards = a.h.Shards()
		a.startWatch()
		a.startMember(c)
		a.armSweep()
		a.publish()
	case dirSnapshot:
		if msg.gen == a.watchGen {
			a.rewatch = rewatchMin
			a.ready = true
			a.changed(a.view.reset(msg.evs, time.Now()))
		}
	case dirEvents:
		if msg.gen == a.watchGen {
			now := time.Now()
			var ch change
			for _, ev := range msg.evs {
				ch.add(a.view.apply(ev, now))
			}
			a.changed(ch)
		}
	case dirEnded:
		a.watchEnded(msg)
	case rewatchTick:
		if msg.gen == a.watchGen && a.watchCancel == nil {
			a.startWatch()
		}
	case reconcileTick:
		a.settleArmed = false
		a.reconcile(c)
	case sweepTick:
		a.sweepNow(c)
	case recheckTick:
		a.recheckAt = time.Time{}
		a.changed(change{members: true})
	case leaseReport:
		a.report(msg)
	case resigned:
		a.resigned(c, msg)
	case drainRequest:
		a.drain(c, msg.reply)
	case shardsChanged:
		a.shards = a.h.Shards()
		a.reconcileSoon()
	case *actor.Terminated:
		a.terminated(c, msg.Who)
	case *actor.Stopping:
		a.stopTimers()
		if a.watchCancel != nil {
			a.watchCancel()
			a.watchCancel = nil
		}
	}
}

// HandleFailure implements actor.SupervisorStrategy for the Host's
// children: a lease supervisor that escalates (it gave up) is stopped, and
// its shard quarantined; one that escalates because the store stopped for
// good, or was closed, ends Run instead (see storeGone).
func (a *hostActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	err, ok := reason.(error)
	if !ok {
		err = fmt.Errorf("%v", reason)
	}
	if l := a.byPID[child.Id]; l != nil && l.phase == phaseRunning {
		name := l.shard
		if name == "" {
			name = MemberKey(a.h.cfg.Prefix, a.owner)
		}
		if storeGone(err) {
			l.phase = phaseStopping
			a.fail(fmt.Errorf("shard: %s: %w", name, err))
			sup.StopChildren(child)
			return
		}
		until := time.Now().Add(a.h.cfg.quarantine())
		a.quarantined[l.shard] = until
		a.failed(fmt.Errorf("shard %s: %w", name, err))
		a.logAttrs(slog.LevelError, "a lease supervisor gave up; quarantined", slog.String("shard", l.shard),
			slog.Any("error", err), slog.Time("until", until))
		if l.shard != "" {
			a.emit(ShardQuarantined{Shard: l.shard, Err: err, Until: until})
		}
		l.phase = phaseStopping
	}
	sup.StopChildren(child)
}

// changed reacts to a change of the view. A change of the holders can
// change the members too: a member seen only in a snapshot counts once it
// holds a shard (view.placeable).
func (a *hostActor) changed(ch change) {
	if ch.members || ch.holders {
		a.membersChanged()
	}
	if ch.members || ch.holders {
		a.reconcileSoon()
	}
}

// membersChanged reports members that joined or left.
func (a *hostActor) membersChanged() {
	now := map[string]map[string]string{}
	for _, id := range a.placeable() {
		e, _ := a.view.member(id)
		now[id] = e.holder.Meta
	}
	for _, id := range slices.Sorted(maps.Keys(a.members)) {
		if _, ok := now[id]; !ok {
			if a.view.unproven(id) {
				a.logAttrs(slog.LevelInfo, "member left: its key has not been written since this instance "+
					"began watching, and it holds no shard (a crashed member's key the store still keeps)",
					slog.String("member", id))
			} else {
				a.logAttrs(slog.LevelInfo, "member left", slog.String("member", id))
			}
			a.emit(MemberLeft{OwnerID: id})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(now)) {
		if _, ok := a.members[id]; !ok {
			a.logAttrs(slog.LevelInfo, "member joined", slog.String("member", id))
			a.emit(MemberJoined{Member: Member{OwnerID: id, Meta: now[id], Self: id == a.owner}})
		}
	}
	a.members = now
}

// placeable returns the members the view counts now (view.placeable), and
// arranges for the members to be looked at again when that changes by
// itself.
func (a *hostActor) placeable() []string {
	ids, recheck := a.view.placeable(a.owner, time.Now())
	if !recheck.IsZero() && (a.recheckAt.IsZero() || recheck.Before(a.recheckAt)) {
		a.recheckAt = recheck
		d := time.Until(recheck) + time.Millisecond
		root, self := a.sys.Root, a.self
		if a.recheckTimer == nil {
			a.recheckTimer = time.AfterFunc(d, func() { root.Send(self, recheckTick{}) })
		} else {
			a.recheckTimer.Reset(d)
		}
	}
	return ids
}

// reconcileSoon places the shards again after the settle delay.
func (a *hostActor) reconcileSoon() {
	if a.settleArmed {
		return
	}
	a.settleArmed = true
	root, self := a.sys.Root, a.self
	if a.settleTimer == nil {
		a.settleTimer = time.AfterFunc(settle, func() { root.Send(self, reconcileTick{}) })
		return
	}
	a.settleTimer.Reset(settle)
}

// fleet returns the members this instance places the shards over: the
// ones it sees (view.placeable), with itself once it has joined (while its membership lease
// is being taken again, it does not give its shards away), and without
// itself while it drains.
func (a *hostActor) fleet() []string {
	ids := a.placeable()
	in := slices.Contains(ids, a.owner)
	if in {
		a.joined = true
	}
	switch {
	case a.draining && in:
		ids = slices.DeleteFunc(ids, func(id string) bool { return id == a.owner })
	case !a.draining && a.joined && !in:
		ids = append(ids, a.owner)
		slices.Sort(ids)
	}
	return ids
}

// reconcile places the shards and makes this instance run the ones placed
// on it, and only those.
func (a *hostActor) reconcile(c actor.Context) {
	if !a.ready {
		return
	}
	members := a.fleet()
	holders := a.view.holders()
	plan := Place(a.shards, members, holders)
	moving := Moves(plan, members, holders)
	target := map[string]bool{}
	if a.joined && !a.draining {
		for s, m := range plan {
			if m == a.owner {
				target[s] = true
			}
		}
	}
	if !maps.Equal(plan, a.plan) {
		a.emit(PlacementChanged{Members: len(members), Target: len(target), Moving: moving})
	}
	a.plan = plan

	now := time.Now()
	for _, s := range slices.Sorted(maps.Keys(target)) {
		if until, q := a.quarantined[s]; q && now.Before(until) {
			continue
		}
		delete(a.quarantined, s)
		if a.local[s] == nil {
			a.startShard(c, s)
		}
	}
	// The membership is released first when draining: the shards are handed
	// over once the others no longer place them here.
	if !a.draining || a.member == nil {
		for _, s := range slices.Sorted(maps.Keys(a.local)) {
			if l := a.local[s]; !target[s] && l.phase == phaseRunning {
				a.handOver(l)
			}
		}
	}
	a.checkBalance(now, holders)
	a.updateState()
	a.checkDrained()
	a.publish()
}

// checkBalance reports when the view becomes balanced.
func (a *hostActor) checkBalance(now time.Time, holders map[string]string) {
	balanced := isBalanced(a.shards, a.plan, holders)
	switch {
	case balanced && !a.balanced:
		took := now.Sub(a.unbalancedSince)
		a.balanced, a.unbalancedSince = true, time.Time{}
		owned := 0
		for _, s := range a.shards {
			if a.plan[s] == a.owner {
				owned++
			}
		}
		a.logAttrs(slog.LevelInfo, "balanced", slog.Duration("took", took), slog.Int("owned", owned),
			slog.Int("members", len(a.members)))
		a.h.metrics.balanced(took)
		a.emit(Balanced{Took: took, Members: len(a.members), Owned: owned})
	case !balanced && a.balanced:
		a.balanced, a.unbalancedSince = false, now
	}
}

func (a *hostActor) updateState() {
	st := a.state
	switch {
	case a.state == StateDrained:
	case a.draining:
		st = StateDraining
	case a.joined:
		st = StateActive
	default:
		st = StateJoining
	}
	if st != a.state {
		a.state, a.since = st, time.Now()
		a.logAttrs(slog.LevelInfo, "host "+st.String())
	}
}

// startShard starts the shard's supervisor.
func (a *hostActor) startShard(c actor.Context, s string) {
	sup, err := a.h.supervisor(s)
	if err != nil {
		until := time.Now().Add(a.h.cfg.quarantine())
		a.quarantined[s] = until
		a.failed(err)
		a.logAttrs(slog.LevelError, "cannot run a shard; quarantined", slog.String("shard", s), slog.Any("error", err))
		a.emit(ShardQuarantined{Shard: s, Err: err, Until: until})
		return
	}
	l := &local{shard: s, sup: sup, pid: c.Spawn(sup.Props())}
	a.local[s] = l
	a.byPID[l.pid.Id] = l
}

// startMember starts the membership's lease supervisor: its workload does
// nothing but hold the lease, with the instance's Meta.
func (a *hostActor) startMember(c actor.Context) {
	cfg := a.h.cfg
	lc := cfg.Lease
	lc.LeaseID = MemberKey(cfg.Prefix, a.owner)
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lc, Store: cfg.Store, Meta: cfg.Meta, Restart: cfg.Restart,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			<-ctx.Done()
			return nil
		}),
		Logger:  a.h.subLogger("membership", lc.LeaseID),
		OnEvent: func(ev actors.Event) { a.h.forward(leaseReport{member: true, ev: ev}) },
	})
	if err != nil { // cannot happen with a validated Config
		a.failed(err)
		return
	}
	a.member = &local{sup: sup, pid: c.Spawn(sup.Props())}
	a.byPID[a.member.pid.Id] = a.member
}

// handOver stops a shard placed elsewhere: Resign (the workload stops, the
// lease is released), then the supervisor stops.
func (a *hostActor) handOver(l *local) {
	l.phase = phaseResigning
	a.logAttrs(slog.LevelInfo, "handing a shard over", slog.String("shard", l.shard))
	root, self, budget := a.sys.Root, a.self, a.h.handoverBudget()
	a.h.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		err := l.sup.Resign(ctx, resignHoldOff)
		if errors.Is(err, actors.ErrNotRunning) {
			err = nil // not started yet: stopping it is all there is to do
		}
		root.Send(self, resigned{l: l, err: err})
	})
}

func (a *hostActor) resigned(c actor.Context, msg resigned) {
	l := msg.l
	if l.phase != phaseResigning {
		return
	}
	if msg.err != nil {
		l.err = fmt.Errorf("%w: shard %s: %w", ErrHandoverFailed, l.shard, msg.err)
	}
	l.phase = phaseStopping
	c.Stop(l.pid)
}

// terminated handles a child's end.
func (a *hostActor) terminated(c actor.Context, who *actor.PID) {
	l := a.byPID[who.Id]
	if l == nil {
		return
	}
	delete(a.byPID, who.Id)
	if l == a.member {
		a.member = nil
		if !a.draining {
			if _, q := a.quarantined[""]; !q {
				a.startMember(c) // it stopped by itself: cannot happen, but never stay out of the fleet
			}
		}
		a.reconcile(c)
		return
	}
	if a.local[l.shard] == l {
		delete(a.local, l.shard)
	}
	if l.phase == phaseResigning || l.phase == phaseStopping {
		if _, q := a.quarantined[l.shard]; !q || l.err != nil {
			a.handedOverShard(l)
		}
	}
	a.reconcileSoon()
	a.checkDrained()
	a.publish()
}

// handedOverShard reports a handover.
func (a *hostActor) handedOverShard(l *local) {
	if l.err != nil {
		a.failed(l.err)
		a.drainErrs = append(a.drainErrs, l.err)
		a.logAttrs(slog.LevelWarn, "shard handed over uncleanly; its lease expires", slog.String("shard", l.shard),
			slog.Any("error", l.err))
	}
	if l.token != 0 {
		a.handedOver++
		a.h.metrics.handedOver()
	}
	a.emit(ShardHandedOver{Shard: l.shard, Token: l.token, Err: l.err})
}

// report handles an event of a lease supervisor.
func (a *hostActor) report(msg leaseReport) {
	a.emit(LeaseEvent{Shard: msg.shard, Event: msg.ev})
	if msg.member {
		return
	}
	acq, ok := msg.ev.(actors.Acquired)
	if !ok {
		return
	}
	from := ""
	if e, ok := a.view.shard(msg.shard); ok {
		from = e.holder.OwnerID
		if e.held && e.holder.Token == acq.Token {
			from = e.prev
		}
	}
	if from == a.owner {
		from = ""
	}
	if l := a.local[msg.shard]; l != nil {
		l.token = acq.Token
	}
	if from != "" {
		a.movedIn++
		a.h.metrics.movedIn()
	}
	a.emit(ShardStarted{Shard: msg.shard, Token: acq.Token, From: from})
}

// drain starts leaving the fleet, or reports that it is done.
func (a *hostActor) drain(c actor.Context, reply chan<- error) {
	a.drainWait = append(a.drainWait, reply)
	if !a.draining {
		a.draining = true
		a.logAttrs(slog.LevelInfo, "draining: leaving the fleet")
		if m := a.member; m != nil && m.phase == phaseRunning {
			m.phase = phaseStopping
			c.Stop(m.pid)
		}
	}
	a.ready = true // a Host that never saw the fleet hands over what it runs all the same
	a.reconcile(c)
}

// checkDrained answers Drain once nothing runs.
func (a *hostActor) checkDrained() {
	if !a.draining || a.member != nil || len(a.local) > 0 {
		return
	}
	if a.state != StateDrained {
		a.state, a.since = StateDrained, time.Now()
		a.logAttrs(slog.LevelInfo, "drained: every shard handed over")
	}
	a.publish() // before the answer: Status says drained once Drain returns
	err := errors.Join(a.drainErrs...)
	for _, r := range a.drainWait {
		r <- err
	}
	a.drainWait = nil
}

// sweepNow ages the view and ends quarantines.
func (a *hostActor) sweepNow(c actor.Context) {
	ch := a.view.age()
	a.changed(ch)
	now := time.Now()
	for s, until := range a.quarantined {
		if !now.Before(until) {
			delete(a.quarantined, s)
			if s == "" && a.member == nil && !a.draining {
				a.startMember(c)
			}
			a.reconcileSoon()
		}
	}
	a.armSweep()
}

// armSweep schedules the next sweep: a quarter of the TTL, at most a second.
func (a *hostActor) armSweep() {
	d := min(a.h.cfg.Lease.EffectiveTTL()/4, time.Second)
	root, self := a.sys.Root, a.self
	if a.sweep == nil {
		a.sweep = time.AfterFunc(d, func() { root.Send(self, sweepTick{}) })
		return
	}
	a.sweep.Reset(d)
}

func (a *hostActor) stopTimers() {
	for _, t := range []*time.Timer{a.sweep, a.settleTimer, a.rewatchTimer, a.recheckTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// storeGone reports whether err says that the store can never answer
// again: it stopped for good (actors.ErrStoreStopped) or was closed. No
// quarantine or retry can help; Run ends, so that the process exits and is
// restarted.
func storeGone(err error) bool {
	return errors.Is(err, actors.ErrStoreStopped) || errors.Is(err, lease.ErrClosed)
}

// fail ends Run with err, once: the first such error is the one reported.
func (a *hostActor) fail(err error) {
	a.failed(err)
	a.logAttrs(slog.LevelError, "the store can never answer again; leaving the fleet and ending Run",
		slog.Any("error", err))
	select {
	case a.fatal <- err:
	default:
	}
}

// failed records err as the last error.
func (a *hostActor) failed(err error) { a.lastErr, a.lastErrAt = err, time.Now() }

func (a *hostActor) emit(ev Event) {
	if a.h.cfg.OnEvent != nil {
		a.h.cfg.OnEvent(ev)
	}
}

func (a *hostActor) logAttrs(level slog.Level, msg string, attrs ...slog.Attr) {
	log := a.h.log
	if !log.Enabled(context.Background(), level) {
		return
	}
	log.LogAttrs(context.Background(), level, msg, append([]slog.Attr{slog.String("owner_id", a.owner)}, attrs...)...)
}
