package scenario

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
)

// beyondStream is how much longer than the stream's own outage the
// leading holder's workload may pause when its server is cut off from the
// cluster (docs/nats.md, isolated servers).
const beyondStream = 250 * time.Millisecond

// holderPartition is the cut of 4 s (longer than the TTL, so that a term
// that lapses shows) of the node the leading holder is connected to, that
// node not leading the stream (its leadership is moved elsewhere first):
// the stream goes on taking writes through the other two nodes, and the
// holder must leave the cut-off node and renew through another before its
// renew deadline.
var holderPartition = clusterCase{"leader-server-partition",
	"the node the leading holder is connected to (not the stream's leader) cut off from the other nodes for 4 s " +
		"(its clients stay connected)", false,
	func(e *env) clusterRun {
		h, _ := e.current()
		n := e.nodeOf(h)
		require.NotNil(e.t, n, "the node of %s", h.name)
		if e.awaitStreamLeader() == n.Name() {
			other := e.cluster.Nodes[(slices.Index(e.cluster.Nodes, n)+1)%len(e.cluster.Nodes)]
			e.moveStreamLeader(other.Name())
			e.awaitWrite(record.Now())
		}
		k := slices.IndexFunc(e.cluster.Nodes, func(m *harness.NATS) bool { return m == n })
		l := e.awaitStreamLeader()
		require.NotEqual(e.t, n.Name(), l, "the stream's leader is the holder's server")
		e.t.Logf("%s: cutting off %s (holder %s), the stream led by %s", e.name, n.Name(), h.name, l)
		from := record.Now()
		e.mark(record.MarkPartition, "", n.Name()+": the leader's server")
		require.NoError(e.t, e.cluster.Isolate(k))
		time.Sleep(4 * time.Second)
		require.NoError(e.t, e.cluster.Heal())
		e.mark(record.MarkPartHeal, "", n.Name())
		e.awaitStreamLeader()
		e.awaitWrite(record.Now())
		time.Sleep(time.Second)
		return single(from, record.Now(), n.Name())
	}}

// TestClusterHolderPartition cuts off the leading holder's server at TTL
// 3 s (the renew deadline 2.4 s after the last renewal) and fails if the
// workload's gap is more than beyondStream longer than the stream's own
// outage in any run: natsstore's isolation check, its timeout a sixth of
// the TTL, moves the holder before its renew deadline. Before, the check
// waited for its whole 2 s timeout, counted from the first request to
// return failing: the term lapsed (2,207 ms of workload gap, issue 32).
func TestClusterHolderPartition(t *testing.T) {
	c := clusterConfigs[0]
	require.Equal(t, 3*time.Second, c.ttl)
	name := clusterName(holderPartition, c)
	testCluster(t, name, holderPartition.name, holderPartition.desc, c, rounds(1, 5), holderPartition.fault)
	rowsMu.Lock()
	row := failovers[len(failovers)-1]
	rowsMu.Unlock()
	require.Equal(t, holderPartition.name, row.Fault)
	require.LessOrEqual(t, row.Beyond.Max, beyondStream,
		"%s: the workload paused %v longer than the stream's outage (max over %d runs; workload gap %v max, stream %v max)",
		name, row.Beyond.Max, row.Runs, row.Work.Max, row.Stream.Max)
	if row.Stream.Max < 2*time.Second { // well within the renew deadline (2.4 s)
		require.Zero(t, row.Handovers, "%s: a handover while the stream took writes", name)
	}
}
