package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Reads of a replicated bucket go to the stream leader (STREAM.MSG.GET),
// which answers from what it has without asking its replicas. A leader cut
// off from the rest of its cluster goes on answering so, from a state that
// no longer moves, until it notices that it lost its quorum (nats-server
// checks every 10 s for 10 s of silence): meanwhile the majority elects a
// new leader and commits writes the old one never sees. A write needs a
// quorum, so a stale leader never lets one through; but a read that the
// store acts on without writing ("held by another", "lost") would be stale.
// Such a read is therefore confirmed by the leader's own account of its
// replicas (STREAM.INFO, the request bucket_isolation.go's probe makes), which
// shows that no other leader can have been elected before the read.
const (
	// electionSilence is how long a raft follower of nats-server goes
	// without hearing from its leader before it may stand for election:
	// its minimum election timeout is 4 s. A leader that heard from every
	// replica within that (less a margin for slow processing) cannot have
	// been replaced yet: no replica has begun an election.
	electionSilence = 3 * time.Second
	// currentWaits is how long the store waits, in all, for a leader
	// that has lost touch with a replica to hear from a majority after a
	// read: an idle leader hears from its replicas once a second.
	currentWaits = 1500 * time.Millisecond
	// firstCurrentWait is the first of those waits; each next one doubles.
	firstCurrentWait = 100 * time.Millisecond
)

// streamView is the part of a STREAM.INFO answer that tells whether its
// leader is current.
type streamView struct {
	Error   *jetstream.APIError    `json:"error,omitempty"`
	Cluster *jetstream.ClusterInfo `json:"cluster,omitempty"`
	TS      time.Time              `json:"ts"`
}

// readMark is when a read was sent, and on which connection to a server
// (the connection's count of reconnects): a confirmation must come through
// the server that answered the read.
type readMark struct {
	sent time.Time
	conn uint64
}

// markRead marks a read about to be sent.
func (c *storeConn) markRead() readMark {
	m := readMark{sent: time.Now()}
	if c.nc != nil {
		m.conn = c.nc.Stats().Reconnects
	}
	return m
}

// replicated reports whether reads must be confirmed: the bucket has more
// than one replica and the store has a connection to ask on.
func (w *writes) replicated() bool { return w.replicas > 1 && w.nc != nil }

// current confirms a read the store is about to act on without a write,
// marked by r: for a replicated bucket, it asks the stream leader about
// its replicas until their answers show that the read could not miss a
// write committed before it (see leadsAt), and returns an error matching
// lease.ErrUnavailable when they do not within currentWaits. It costs
// nothing for a bucket of one replica, and one request when the leader is
// in touch with every replica.
func (w *writes) current(ctx context.Context, deadline time.Time, what string, r readMark) error {
	return w.currentUnless(ctx, deadline, what, r, nil)
}

// errMovedOn reports a read that was not confirmed because what it read
// changed meanwhile: acting on it is moot, and reading again is what to do.
var errMovedOn = errors.New("natsstore: the key changed while its read was being confirmed")

// movedPoll is how often currentUnless asks whether the read moved on while
// it waits for the stream leader to hear from its replicas.
const movedPoll = 5 * time.Millisecond

// currentUnless is current, which returns errMovedOn as soon as moved (if
// not nil) reports, while it waits, that what was read changed since: a
// standby confirming that a key is held, whose watch then delivers the
// release, reads the key again at once instead of after the wait (up to
// currentWaits while a replica is down).
func (w *writes) currentUnless(ctx context.Context, deadline time.Time, what string, r readMark, moved func() bool) error {
	if !w.replicated() {
		return nil
	}
	wait := firstCurrentWait
	var leader string
	for waited := time.Duration(0); ; {
		// 1. Ask the stream leader about its replicas.
		asked := time.Now()
		v, now, err := w.askLeader(ctx, deadline, what, r, leader)
		if err != nil {
			return err
		}
		leader = now
		// 2. Done when its answer shows the read current.
		ok, retry, why := v.leadsAt(asked.Sub(r.sent))
		if ok {
			return nil
		}
		// 3. Otherwise wait for the leader to hear from its replicas, and
		// ask again, while there is time.
		if !retry || waited+wait > currentWaits || time.Until(deadline) < wait {
			return w.unconfirmed(ctx, what, r.sent, why)
		}
		if err := waitUnless(ctx, wait, moved); err != nil {
			if errors.Is(err, errMovedOn) {
				return err
			}
			return w.unconfirmed(ctx, what, r.sent, why)
		}
		waited += wait
		wait *= 2
	}
}

// askLeader asks for the bucket's stream information for currentUnless,
// which confirms the read marked r: the answer must come through the
// server that answered the read, and from the leader that answered earlier
// (leader, if not ""). It returns the leader the answer names, or leader
// when it names none.
func (w *writes) askLeader(ctx context.Context, deadline time.Time, what string, r readMark, leader string) (streamView, string, error) {
	v, err := w.streamView(ctx, deadline)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return v, leader, w.unconfirmed(ctx, what, r.sent, fmt.Sprintf("no answer to the stream information request: %v", err))
		}
		return v, leader, w.fail(ctx, what+" (asking the stream leader whether it is current)", err)
	}
	if w.nc.Stats().Reconnects != r.conn {
		return v, leader, w.unconfirmed(ctx, what, r.sent, "the connection moved to another server after the read")
	}
	if ci := v.Cluster; ci != nil && ci.Leader != "" {
		if leader != "" && ci.Leader != leader {
			return v, leader, w.unconfirmed(ctx, what, r.sent, fmt.Sprintf("the stream's leader changed from %s to %s", leader, ci.Leader))
		}
		leader = ci.Leader
	}
	return v, leader, nil
}

// waitUnless waits for d. It returns ctx's error when ctx ends first, and
// errMovedOn when moved (if not nil) reports true first.
func waitUnless(ctx context.Context, d time.Duration, moved func() bool) error {
	t := time.NewTimer(d)
	defer t.Stop()
	var poll <-chan time.Time
	if moved != nil {
		tick := time.NewTicker(movedPoll)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case <-poll:
			if moved() {
				return errMovedOn
			}
		}
	}
}

// unconfirmed reports a read that could not be confirmed as a failure of
// JetStream: the isolation check (bucket_isolation.go) counts it, so that a store
// whose server is cut off from its cluster moves to another.
func (u *upkeep) unconfirmed(ctx context.Context, what string, sent time.Time, why string) error {
	if iso := &u.health.isolation; !iso.start.IsZero() {
		iso.fail(sent)
	}
	err := fmt.Errorf("natsstore: %s: %w: a read of the bucket's stream cannot be trusted: %s",
		what, lease.ErrUnavailable, why)
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// streamView asks for the bucket's stream information. An answer of a
// stream that is not clustered has a nil Cluster and no Error: reads are
// then not the leader's to confirm. An error answer (no leader, the bucket
// gone) confirms nothing: leadsAt asks again.
func (w *writes) streamView(ctx context.Context, deadline time.Time) (streamView, error) {
	g := w.guard(ctx, deadline, 2)
	defer g.end()
	resp, err := w.nc.RequestWithContext(g.ctx, w.infoSubject, nil)
	if err != nil {
		return streamView{}, err
	}
	var v streamView
	if err := json.Unmarshal(resp.Data, &v); err != nil {
		return streamView{}, fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	}
	return v, nil
}

// leadsAt reports whether v shows that no leader but v's could have
// committed a write before a read sent e before v's request: ok. retry
// means that v's leader may show it after it next hears from its replicas;
// why says what is missing.
//
// A replica that answered the leader after the read was sent (Active at
// most e) was still in the leader's term then, so a majority of such
// replicas (the leader counts) proves that no newer term had a quorum
// before the read. A leader that heard from every replica within
// electionSilence proves it too: no replica can have stood for election
// yet. (Clocks: Active is measured on the server's clock and e on the
// store's; their rates differ by far less than the margins.)
func (v streamView) leadsAt(e time.Duration) (ok, retry bool, why string) {
	ci := v.Cluster
	switch {
	case v.Error != nil:
		return false, true, v.Error.Error()
	case ci == nil:
		return true, false, ""
	case ci.Leader == "":
		return false, true, "the bucket's stream has no leader that this server can reach"
	case ci.LeaderSince != nil && !v.TS.IsZero() && v.TS.Sub(*ci.LeaderSince) < e:
		return false, false, fmt.Sprintf("the bucket's stream leader %s was elected after the read", ci.Leader)
	}
	h := heardFrom(ci.Replicas, e)
	if quorum := (len(ci.Replicas)+1)/2 + 1; h.after >= quorum || h.all {
		return true, false, ""
	}
	return false, true, fmt.Sprintf("the bucket's stream leader %s has not heard from a replica for %v, "+
		"nor from a majority of them since the read", ci.Leader, h.silent.Round(time.Millisecond))
}

// replicasHeard is what a stream leader heard from its replicas, as leadsAt counts
// it.
type replicasHeard struct {
	after  int           // the replicas that answered since the read, and the leader
	all    bool          // every replica answered within electionSilence
	silent time.Duration // the longest silence of a replica that did not
}

// heardFrom counts what the leader heard from replicas, for a read sent e
// before the leader was asked.
func heardFrom(replicas []*jetstream.PeerInfo, e time.Duration) replicasHeard {
	h := replicasHeard{after: 1, all: true}
	for _, p := range replicas {
		seen := p != nil && !p.Offline && (p.Active > 0 || p.Current)
		if seen && p.Active <= e {
			h.after++
		}
		if !seen || p.Active >= electionSilence {
			h.all = false
			if p != nil {
				h.silent = max(h.silent, p.Active)
			}
		}
	}
	return h
}
