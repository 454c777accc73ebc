package natsstore

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

func TestLeadsAt(t *testing.T) {
	now := time.Now()
	long := now.Add(-time.Hour)
	peer := func(active time.Duration) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: "p", Current: true, Active: active}
	}
	view := func(ps ...*jetstream.PeerInfo) streamView {
		return streamView{TS: now, Cluster: &jetstream.ClusterInfo{Leader: "l", LeaderSince: &long, Replicas: ps}}
	}
	unseen := &jetstream.PeerInfo{Name: "p", Offline: true}
	for _, tc := range []struct {
		name      string
		v         streamView
		e         time.Duration
		ok, retry bool
	}{
		{"not clustered", streamView{}, time.Millisecond, true, false},
		{"every replica within the election timeout", view(peer(900*time.Millisecond), peer(2*time.Second)), time.Millisecond, true, false},
		{"a majority after the read", view(peer(time.Millisecond), peer(time.Minute)), 2 * time.Millisecond, true, false},
		{"a replica silent, the other before the read", view(peer(500*time.Millisecond), peer(time.Minute)), time.Millisecond, false, true},
		{"every replica silent: isolated", view(peer(5*time.Second), peer(5*time.Second)), time.Millisecond, false, true},
		{"a replica never seen counts as silent", view(peer(time.Second), unseen), time.Millisecond, false, true},
		{"no leader", streamView{Cluster: &jetstream.ClusterInfo{}}, time.Millisecond, false, true},
		{"a leader elected after the read", streamView{TS: now, Cluster: &jetstream.ClusterInfo{Leader: "l", LeaderSince: &now,
			Replicas: []*jetstream.PeerInfo{peer(0), peer(0)}}}, time.Millisecond, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, retry, why := tc.v.leadsAt(tc.e)
			assert.Equal(t, tc.ok, ok, why)
			assert.Equal(t, tc.retry, retry, why)
		})
	}
}
