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
// local supervisors, which are its children. Its state is in parts
// (actor_state.go).
type hostActor struct {
	h     *Host
	fatal chan<- error // ends Run
	self  *actor.PID
	sys   *actor.ActorSystem
	owner string

	watch  fleetWatch
	plan   fleetPlan
	runs   runs
	life   life
	tally  tally
	timers timers
}

func newHostActor(h *Host, fatal chan<- error) *hostActor {
	return &hostActor{h: h, fatal: fatal, owner: h.cfg.Lease.OwnerID,
		watch: fleetWatch{view: newView(h.cfg.Prefix, h.cfg.Lease.EffectiveTTL()), pause: rewatchMin},
		plan:  fleetPlan{members: map[string]map[string]string{}, unbalancedSince: time.Now()},
		runs:  newRuns(), life: life{since: time.Now()}}
}

// Receive implements actor.Actor: one call for each message.
func (a *hostActor) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case dirSnapshot:
		a.snapshot(msg)
	case dirEvents:
		a.events(msg)
	case dirEnded:
		a.watchEnded(msg)
	case rewatchTick:
		a.rewatchNow(msg)
	case reconcileTick:
		a.timers.settleArmed = false
		a.reconcile(c)
	case sweepTick:
		a.sweepNow(c)
	case recheckTick:
		a.timers.recheckAt = time.Time{}
		a.changed(change{members: true})
	case leaseReport:
		a.report(msg)
	case resigned:
		a.resigned(c, msg)
	case drainRequest:
		a.drain(c, msg.reply)
	case shardsChanged:
		a.plan.shards = a.h.Shards()
		a.reconcileSoon()
	case *actor.Terminated:
		a.terminated(c, msg.Who)
	case *actor.Stopping:
		a.timers.stop()
		a.watch.stop()
	}
}

// started begins: the watch, the membership and the sweeps.
func (a *hostActor) started(c actor.Context) {
	a.self, a.sys = c.Self(), c.ActorSystem()
	a.h.ref.Store(&hostRef{sys: a.sys, pid: a.self}) // before any supervisor reports
	a.plan.shards = a.h.Shards()
	a.startWatch()
	a.startMember(c)
	a.armSweep()
	a.publish()
}

// snapshot records the current watch's first report.
func (a *hostActor) snapshot(msg dirSnapshot) {
	if !a.watch.current(msg.gen) {
		return
	}
	a.watch.pause = rewatchMin
	a.watch.ready = true
	a.changed(a.watch.view.reset(msg.evs, time.Now()))
}

// events records the current watch's changes.
func (a *hostActor) events(msg dirEvents) {
	if !a.watch.current(msg.gen) {
		return
	}
	now := time.Now()
	var ch change
	for _, ev := range msg.evs {
		ch.add(a.watch.view.apply(ev, now))
	}
	a.changed(ch)
}

// send returns a function that sends msg to the actor, for its timers.
func (a *hostActor) send(msg any) func() {
	root, self := a.sys.Root, a.self
	return func() { root.Send(self, msg) }
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
	if l := a.runs.byPID[child.Id]; l != nil && l.phase == phaseRunning {
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
		a.runs.quarantined[l.shard] = until
		a.tally.failed(fmt.Errorf("shard %s: %w", name, err))
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
		e, _ := a.watch.view.member(id)
		now[id] = e.holder.Meta
	}
	for _, id := range slices.Sorted(maps.Keys(a.plan.members)) {
		if _, ok := now[id]; !ok {
			if a.watch.view.unproven(id) {
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
		if _, ok := a.plan.members[id]; !ok {
			a.logAttrs(slog.LevelInfo, "member joined", slog.String("member", id))
			a.emit(MemberJoined{Member: Member{OwnerID: id, Meta: now[id], Self: id == a.owner}})
		}
	}
	a.plan.members = now
}

// placeable returns the members the view counts now (view.placeable), and
// arranges for the members to be looked at again when that changes by
// itself.
func (a *hostActor) placeable() []string {
	ids, recheck := a.watch.view.placeable(a.owner, time.Now())
	t := &a.timers
	if !recheck.IsZero() && (t.recheckAt.IsZero() || recheck.Before(t.recheckAt)) {
		t.recheckAt = recheck
		t.recheck = after(t.recheck, time.Until(recheck)+time.Millisecond, a.send(recheckTick{}))
	}
	return ids
}

// reconcileSoon places the shards again after the settle delay.
func (a *hostActor) reconcileSoon() {
	if a.timers.settleArmed {
		return
	}
	a.timers.settleArmed = true
	a.timers.settle = after(a.timers.settle, settle, a.send(reconcileTick{}))
}

// fleet returns the members this instance places the shards over: the
// ones it sees (view.placeable), with itself once it has joined (while its membership lease
// is being taken again, it does not give its shards away), and without
// itself while it drains.
func (a *hostActor) fleet() []string {
	ids := a.placeable()
	in := slices.Contains(ids, a.owner)
	if in && a.life.stage == stageJoining {
		a.life.stage = stageMember
	}
	switch {
	case a.life.stage == stageDraining && in:
		ids = slices.DeleteFunc(ids, func(id string) bool { return id == a.owner })
	case a.life.stage == stageMember && !in:
		ids = append(ids, a.owner)
		slices.Sort(ids)
	}
	return ids
}

// reconcile places the shards and makes this instance run the ones placed
// on it, and only those, in four steps.
func (a *hostActor) reconcile(c actor.Context) {
	if !a.watch.ready {
		return
	}
	// 1. Place the shards over the fleet this instance sees.
	holders := a.watch.view.holders()
	target := a.place(holders)
	// 2. Start the shards placed here that do not run, unless quarantined.
	now := time.Now()
	a.startPlaced(c, target, now)
	// 3. Hand over the others. The membership is released first when
	// draining: the shards are handed over once the others no longer place
	// them here.
	if !a.life.draining() || a.runs.member == nil {
		a.handOverUnplaced(target)
	}
	// 4. Report what changed.
	a.checkBalance(now, holders)
	a.updateState()
	a.checkDrained()
	a.publish()
}

// place computes the placement, reports when it changed, and returns the
// shards placed on this instance (none unless it is a member).
func (a *hostActor) place(holders map[string]string) (target map[string]bool) {
	members := a.fleet()
	placed := Place(a.plan.shards, members, holders)
	moving := Moves(placed, members, holders)
	target = map[string]bool{}
	if a.life.stage == stageMember {
		for s, m := range placed {
			if m == a.owner {
				target[s] = true
			}
		}
	}
	if !maps.Equal(placed, a.plan.placed) {
		a.emit(PlacementChanged{Members: len(members), Target: len(target), Moving: moving})
	}
	a.plan.placed = placed
	return target
}

// startPlaced starts the supervisors of the target shards that do not
// run, except those quarantined at now; it ends the quarantines past.
func (a *hostActor) startPlaced(c actor.Context, target map[string]bool, now time.Time) {
	for _, s := range slices.Sorted(maps.Keys(target)) {
		if until, q := a.runs.quarantined[s]; q && now.Before(until) {
			continue
		}
		delete(a.runs.quarantined, s)
		if a.runs.byShard[s] == nil {
			a.startShard(c, s)
		}
	}
}

// handOverUnplaced hands over the running shards that are not targets.
func (a *hostActor) handOverUnplaced(target map[string]bool) {
	for _, s := range slices.Sorted(maps.Keys(a.runs.byShard)) {
		if l := a.runs.byShard[s]; !target[s] && l.phase == phaseRunning {
			a.handOver(l)
		}
	}
}

// checkBalance reports when the view becomes balanced.
func (a *hostActor) checkBalance(now time.Time, holders map[string]string) {
	balanced := isBalanced(a.plan.shards, a.plan.placed, holders)
	switch {
	case balanced && !a.plan.balanced():
		took := now.Sub(a.plan.unbalancedSince)
		a.plan.unbalancedSince = time.Time{}
		owned := a.plan.owned(a.owner)
		a.logAttrs(slog.LevelInfo, "balanced", slog.Duration("took", took), slog.Int("owned", owned),
			slog.Int("members", len(a.plan.members)))
		a.h.metrics.balanced(took)
		a.emit(Balanced{Took: took, Members: len(a.plan.members), Owned: owned})
	case !balanced && a.plan.balanced():
		a.plan.unbalancedSince = now
	}
}

// updateState enters the State the stage means.
func (a *hostActor) updateState() {
	if st := a.life.next(); a.life.enter(st) {
		a.logAttrs(slog.LevelInfo, "host "+st.String())
	}
}

// startShard starts the shard's supervisor.
func (a *hostActor) startShard(c actor.Context, s string) {
	sup, err := a.h.supervisor(s)
	if err != nil {
		until := time.Now().Add(a.h.cfg.quarantine())
		a.runs.quarantined[s] = until
		a.tally.failed(err)
		a.logAttrs(slog.LevelError, "cannot run a shard; quarantined", slog.String("shard", s), slog.Any("error", err))
		a.emit(ShardQuarantined{Shard: s, Err: err, Until: until})
		return
	}
	a.runs.add(&local{shard: s, sup: sup, pid: c.Spawn(sup.Props())})
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
		a.tally.failed(err)
		return
	}
	a.runs.addMember(&local{sup: sup, pid: c.Spawn(sup.Props())})
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
	wasMember := a.runs.member
	l := a.runs.remove(who)
	if l == nil {
		return
	}
	if l == wasMember {
		if !a.life.draining() {
			if _, q := a.runs.quarantined[""]; !q {
				a.startMember(c) // it stopped by itself: cannot happen, but never stay out of the fleet
			}
		}
		a.reconcile(c)
		return
	}
	if l.phase == phaseResigning || l.phase == phaseStopping {
		if _, q := a.runs.quarantined[l.shard]; !q || l.err != nil {
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
		a.tally.failed(l.err)
		a.life.drainErrs = append(a.life.drainErrs, l.err)
		a.logAttrs(slog.LevelWarn, "shard handed over uncleanly; its lease expires", slog.String("shard", l.shard),
			slog.Any("error", l.err))
	}
	if l.token != 0 {
		a.tally.handedOver++
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
	if e, ok := a.watch.view.shard(msg.shard); ok {
		from = e.holder.OwnerID
		if e.held() && e.holder.Token == acq.Token {
			from = e.prev
		}
	}
	if from == a.owner {
		from = ""
	}
	if l := a.runs.byShard[msg.shard]; l != nil {
		l.token = acq.Token
	}
	if from != "" {
		a.tally.movedIn++
		a.h.metrics.movedIn()
	}
	a.emit(ShardStarted{Shard: msg.shard, Token: acq.Token, From: from})
}

// drain starts leaving the fleet, or reports that it is done.
func (a *hostActor) drain(c actor.Context, reply chan<- error) {
	a.life.drainWait = append(a.life.drainWait, reply)
	if !a.life.draining() {
		a.life.stage = stageDraining
		a.logAttrs(slog.LevelInfo, "draining: leaving the fleet")
		if m := a.runs.member; m != nil && m.phase == phaseRunning {
			m.phase = phaseStopping
			c.Stop(m.pid)
		}
	}
	a.watch.ready = true // a Host that never saw the fleet hands over what it runs all the same
	a.reconcile(c)
}

// checkDrained answers Drain once nothing runs.
func (a *hostActor) checkDrained() {
	if !a.life.draining() || !a.runs.idle() {
		return
	}
	if a.life.enter(StateDrained) {
		a.logAttrs(slog.LevelInfo, "drained: every shard handed over")
	}
	a.publish() // before the answer: Status says drained once Drain returns
	err := errors.Join(a.life.drainErrs...)
	for _, r := range a.life.drainWait {
		r <- err
	}
	a.life.drainWait = nil
}

// sweepNow ages the view and ends quarantines.
func (a *hostActor) sweepNow(c actor.Context) {
	ch := a.watch.view.age()
	a.changed(ch)
	now := time.Now()
	for s, until := range a.runs.quarantined {
		if !now.Before(until) {
			delete(a.runs.quarantined, s)
			if s == "" && a.runs.member == nil && !a.life.draining() {
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
	a.timers.sweep = after(a.timers.sweep, d, a.send(sweepTick{}))
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
	a.tally.failed(err)
	a.logAttrs(slog.LevelError, "the store can never answer again; leaving the fleet and ending Run",
		slog.Any("error", err))
	select {
	case a.fatal <- err:
	default:
	}
}

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
