package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/natsstore"
)

// TestSessionLockStaleLeader gives contenders of a lock held under a
// session (lock.Config.Session) old answers for the session's key, while
// the session's holder keeps renewing it: the answers of a stream leader
// deposed by a partition.
//
// A 3-node cluster, the bucket with three replicas. Each round, the stream
// is led by the node that leads the meta group (a node cut off from the
// meta leader refuses reads once it stands for election, after 4 – 9 s; a
// meta leader answers until it notices that it lost its quorum, after
// 10 – 20 s). Holder processes (lock.Locker under a session, Acquire) are
// connected to the two other nodes; contender processes, with a lease of
// their own for the lock, to that node, with no isolation timeout: one of
// two TryAcquire loops (every 100 ms), one waiting in Acquire. The round
// cuts that node off from the other two 300 ms before the holder's next
// renewal. The other two elect a new stream leader, and the holder renews
// its session through it (TTL 15 s, renew interval 2 s: the configuration
// docs/tuning.md gives for riding out an election). The cut-off node goes
// on answering reads from the state it had: the contenders see the lock's
// session key unchanged, and once they have seen it so for its TTL they
// judge the session ended and write. Their write cannot commit on that
// node; natsstore sends it again until the call's timeout (a renew period,
// 2 s), so the partition heals as soon as a contender's acquire has
// failed other than on a read it could not confirm (at most after 22 s),
// and a write sent again reaches the new leader. A take of the lock then
// rests on a revision of the session key that the holder has renewed past;
// it must be refused. Each round starts new holders and contenders and
// stops the old ones gracefully (a release: the handovers counted).
//
// The short suite runs one round (about 30 s: the TTL's observation and
// the election are its floor).
func TestSessionLockStaleLeader(t *testing.T) {
	const (
		name       = "session-stale-leader"
		sessionTTL = 15 * time.Second
		sessionRen = 2 * time.Second
		poll       = 100 * time.Millisecond // the contenders' TryAcquire interval
		// The cut is made 300 ms before the holder's next renewal, and
		// healed once a contender wrote (or after maxCut).
		maxCut = 22 * time.Second
	)
	e := newClusterEnv(t, name)
	e.ttl, e.renew = sessionTTL, sessionRen
	n := rounds(1, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
	defer cancel()
	require.NoError(t, natsstore.CreateBucket(ctx, e.jetStream(), natsstore.Config{Bucket: bucket, Replicas: 3,
		MaxTTL: sessionTTL}))
	holders, contenders := map[string]bool{}, map[string]bool{}
	// deploy puts the holders on every node but node and the contenders on
	// node: new processes start, then the old ones stop gracefully (a
	// holder's lock goes to another, or to a contender that gives it back).
	deploy := func(node *harness.NATS) {
		var majority []string
		for _, other := range e.cluster.Nodes {
			if other != node {
				majority = append(majority, other.URL())
			}
		}
		old := maps.Clone(holders)
		maps.Copy(old, contenders)
		clear(holders)
		clear(contenders)
		for range 2 {
			h := e.start("-mode", "lock", "-session", "-replicas", "3", "-max-ttl", sessionTTL.String(),
				"-nats", strings.Join(majority, ","), "-isolation", "2s")
			holders[h.name] = true
		}
		// The contenders, with a lease of their own for the lock (a Locker
		// under a session could not renew its own session through the
		// cut-off node): one process of two TryAcquire loops, one waiting
		// in Acquire. A lock they get is held 300 ms and released.
		for _, extra := range [][]string{{"-try", "-candidates", "2"}, {}} {
			h := e.start(append([]string{"-mode", "lock", "-replicas", "3", "-max-ttl", sessionTTL.String(),
				"-nats", node.URL(), "-hold", "300ms", "-standby", poll.String()}, extra...)...)
			contenders[h.name] = true
		}
		for name := range old {
			e.mu.Lock()
			h := e.holders[name]
			e.mu.Unlock()
			require.NoError(t, h.proc.Terminate(limit))
		}
	}

	contended := 0
	for i := range n {
		// The cut-off node must lead both the stream and the meta group:
		// a node cut off from the meta leader answers reads with "JetStream
		// system temporarily unavailable" once it stands for election
		// (4 – 9 s), while a meta leader goes on answering until it
		// notices that it lost its quorum (10 – 20 s).
		node := e.cluster.Node(e.metaLeader())
		require.NotNil(t, node, "the meta leader")
		e.moveStreamLeader(node.Name())
		deploy(node)
		k := slices.Index(e.cluster.Nodes, node)
		h := e.awaitHolder(holders)
		// Cut shortly before the holder's next renewal of its session, so
		// that the contenders' observation of the last one counts from as
		// early as it can.
		e.awaitRenewal(h)
		time.Sleep(sessionRen - 300*time.Millisecond)
		cutAt := record.Now()
		e.mark(record.MarkPartition, "", node.Name())
		require.NoError(t, e.cluster.Isolate(k))
		wrote := e.awaitContenderWrite(contenders, cutAt, maxCut)
		require.NoError(t, e.cluster.Heal())
		e.mark(record.MarkPartHeal, "", node.Name())
		healAt := record.Now()
		hctx, cancel := context.WithTimeout(context.Background(), 2*limit)
		require.NoError(t, e.cluster.WaitHealthy(hctx, 2*limit))
		cancel()
		e.awaitWrite(record.Now())
		time.Sleep(sessionRen) // a renewal through the new leader, and the contenders' next attempts
		if wrote {
			contended++
		}
		t.Logf("%s: round %d: %s cut off for %v; a contender wrote: %v", name, i+1, node.Name(),
			time.Duration(healAt-cutAt).Round(time.Millisecond), wrote)
	}
	e.finish(fmt.Sprintf("3-node cluster, locks under a session (TTL %v, renew interval %v): holders on the two nodes "+
		"that keep the quorum, TryAcquire and Acquire contenders on the node that leads the stream and the meta group, "+
		"cut off from the others until a contender writes on what it answers (at most 22 s)", sessionTTL, sessionRen), n,
		fmt.Sprintf("in %d of %d cuts a contender wrote on what the cut-off node answered (the others healed after %v)",
			contended, n, maxCut), "release")
}

// awaitHolder waits until one of holders (by name) wrote last, and
// returns it: a contender that took the lock releases it 300 ms later.
func (e *env) awaitHolder(holders map[string]bool) *holder {
	e.t.Helper()
	deadline := time.Now().Add(2 * limit)
	for {
		h, _ := e.current()
		if h != nil && holders[h.name] && !h.proc.Exited() {
			return h
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no holder process holds the lock after %v", e.name, 2*limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitRenewal waits until h has a renewal in flight and returns when it
// has returned (or after a while).
func (e *env) awaitRenewal(h *holder) {
	e.t.Helper()
	tail := record.NewTail(h.log)
	deadline := time.Now().Add(limit)
	seen := false
	for time.Now().Before(deadline) {
		ops, err := tail.InFlight()
		require.NoError(e.t, err)
		renewing := slices.ContainsFunc(ops, func(op record.Op) bool { return op.Type == record.OpRenew })
		if seen && !renewing {
			return
		}
		seen = seen || renewing
		time.Sleep(time.Millisecond)
	}
}

// awaitContenderWrite waits up to d for an acquire of one of procs,
// called after from, to fail other than on a read that could not be
// trusted (the store's confirmation of a "held" verdict, which a cut-off
// stream leader cannot give), or to succeed: an acquire that wrote. It
// reports whether one did.
func (e *env) awaitContenderWrite(procs map[string]bool, from int64, d time.Duration) bool {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		h, err := record.ReadLogs(e.dir)
		require.NoError(e.t, err)
		if slices.ContainsFunc(h.Ops, func(op record.Op) bool {
			return procs[op.Proc] && op.Type == record.OpAcquire && op.Call >= from && op.Return != record.Never &&
				op.Result != record.ResultStandby && !strings.Contains(op.Err, "cannot be trusted")
		}) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// metaLeader returns the name of the JetStream meta leader, as a running
// node's monitoring (/jsz) reports it.
func (e *env) metaLeader() string {
	e.t.Helper()
	deadline := time.Now().Add(2 * limit)
	for time.Now().Before(deadline) {
		for _, n := range e.cluster.Nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			body, _, err := n.Get(ctx, "/jsz")
			cancel()
			var jsz struct {
				Meta struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			if err == nil && json.Unmarshal(body, &jsz) == nil && jsz.Meta.Leader != "" {
				return jsz.Meta.Leader
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("%s: no meta leader after %v", e.name, 2*limit)
	return ""
}

// moveStreamLeader has the bucket's stream led by the node named to (a
// leader stepdown with it preferred).
func (e *env) moveStreamLeader(to string) {
	e.t.Helper()
	e.jetStream()
	deadline := time.Now().Add(2 * limit)
	for e.streamLeader() != to {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: the stream is not led by %s after %v", e.name, to, 2*limit)
		}
		_, _ = e.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+bucket,
			[]byte(`{"placement":{"preferred":"`+to+`"}}`), time.Second)
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
	defer cancel()
	require.NoError(e.t, e.cluster.WaitHealthy(ctx, 2*limit))
}
