package natsstore_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A five-node cluster whose bucket's stream lives on three of them loses
// its JetStream meta group's quorum while the stream keeps its own: the
// stream's leader and one more replica stay together, the other three nodes
// (the meta leader among them) are cut off. Every server then answers reads
// of the stream with 503, although the stream takes writes, as the whole
// cluster did for seconds after a partition healed in the chaos suite. A
// standby without a watch takes a lease that expired meanwhile through a
// direct get, which the stream's replicas answer without the meta group.
func TestExpiredKeyTakenWithoutMetaQuorum(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 5)
	byName := map[string]*natstest.Server{}
	for _, s := range c.Servers {
		byName[s.Name()] = s
	}
	nc, js := conn(t, c.Servers[0].ClientURL())
	cfg := natsstore.Config{Replicas: 3, IsolationTimeout: -1}
	dial(t, c.Servers[0].ClientURL(), cfg) // creates the bucket

	// Keep the stream's leader and one more replica, neither of them the
	// meta leader: the other three are cut off.
	st, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	peers := []*natstest.Server{byName[st.CachedInfo().Cluster.Leader]}
	for _, r := range st.CachedInfo().Cluster.Replicas {
		peers = append(peers, byName[r.Name])
	}
	require.Len(t, peers, 3)
	meta := metaLeader(t, c)
	keep := slices.DeleteFunc(slices.Clone(peers), func(s *natstest.Server) bool { return s == meta })[:2]
	moveStreamLeader(t, nc, c, keep[0])
	home := keep[1].ClientURL()
	owner := dial(t, home, cfg)
	standby := dial(t, home, cfg)
	hnc, js := conn(t, home)

	held := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Second})
	got, err := standby.Acquire(ctxT(t), lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: time.Second})
	require.NoError(t, err)
	require.False(t, got.Acquired)
	stream, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctxT(t), "$KV."+natsstore.DefaultBucket+".job")
		return err == nil && m.Header.Get(jetstream.MarkerReasonHeader) == "MaxAge"
	}, 10*time.Second, 20*time.Millisecond, "the server never expired the lease")

	for _, s := range c.Servers {
		if !slices.Contains(keep, s) {
			p.Isolate(s)
		}
	}
	// refused reports whether a read through the stream leader
	// (STREAM.MSG.GET, as the store reads) is answered 503.
	refused := func() bool {
		req := fmt.Appendf(nil, `{"last_by_subj":"$KV.%s.job"}`, natsstore.DefaultBucket)
		m, err := hnc.Request("$JS.API.STREAM.MSG.GET."+bucketStream, req, 2*time.Second)
		if err != nil {
			t.Logf("read: %v", err)
			return false
		}
		var r struct {
			Error *jetstream.APIError `json:"error"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &r))
		if r.Error == nil {
			return false
		}
		t.Logf("read: %v", r.Error)
		return r.Error.Code == 503
	}
	require.Eventually(t, refused, 40*time.Second, 100*time.Millisecond, "reads were never refused")

	got, err = standby.Acquire(ctxT(t), lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: time.Second})
	require.NoError(t, err)
	require.True(t, got.Acquired, "the expired lease was not taken while reads were refused")
	assert.Greater(t, got.Lease.Token, held.Token)
	require.True(t, refused(), "reads were answered again: the test proves nothing")
}
