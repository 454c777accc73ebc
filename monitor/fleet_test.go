package monitor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
)

// fleetAt is a Fleet whose Status is st.
type fleetAt shard.Status

func (f fleetAt) Status() shard.Status { return shard.Status(f) }

func TestFleetHealth(t *testing.T) {
	now := time.Now()
	withLocal := func(st actors.Status) shard.Status {
		return shard.Status{Prefix: "billing", State: shard.StateActive, Balanced: true,
			Shards: []shard.ShardStatus{{Name: "tenant/0"}, {Name: "tenant/3", Local: &st}}}
	}
	for _, tc := range []struct {
		name   string
		status shard.Status
		live   bool
		ready  bool
		reason string
	}{
		{name: "active", status: withLocal(actors.Status{LeaseID: "billing.shards.tenant/3", State: actors.StateLeading,
			Token: 42, ValidUntil: now.Add(time.Hour)}), live: true, ready: true},
		{name: "unbalanced is no problem", status: shard.Status{Prefix: "billing", State: shard.StateActive,
			UnbalancedSince: now.Add(-time.Minute)}, live: true, ready: true},
		{name: "draining", status: shard.Status{Prefix: "billing", State: shard.StateDraining}, live: true, ready: true},
		{name: "starting", status: shard.Status{Prefix: "billing"}, live: true,
			reason: "fleet billing: starting: it has not read the fleet's leases yet"},
		{name: "stopped", status: shard.Status{Prefix: "billing", State: shard.StateStopped,
			LastError: "shard: watching the fleet: lease: store closed"}, live: true,
			reason: "fleet billing: stopped: its Run has returned (last error: shard: watching the fleet: lease: store closed)"},
		{name: "a shard's renewal overdue", status: withLocal(actors.Status{LeaseID: "billing.shards.tenant/3",
			State: actors.StateLeading, Token: 42, ValidUntil: now.Add(-time.Hour), RenewedAt: now.Add(-time.Hour)}),
			reason: "fleet billing shard tenant/3: leads with token 42, but its renewal is overdue"},
		{name: "a shard's workload stuck", status: withLocal(actors.Status{LeaseID: "billing.shards.tenant/3",
			State: actors.StateStandby, Stuck: 1, LastError: "actors: workload did not stop in time (token 7)"}),
			reason: "fleet billing shard tenant/3: workloads of earlier terms did not stop (1); no term starts until " +
				"they do (last error: actors: workload did not stop in time (token 7))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := monitor.New(monitor.Config{Instance: "pod-a"})
			reg.AddFleet(fleetAt(tc.status))
			rep := reg.Report()
			require.Len(t, rep.Fleets, 1)
			assert.Equal(t, "billing", rep.Fleets[0].Prefix)
			assert.Equal(t, tc.live, rep.Live, "live")
			assert.Equal(t, tc.ready, rep.Ready, "ready")
			if tc.reason == "" {
				assert.Empty(t, rep.Problems)
				return
			}
			require.Len(t, rep.Problems, 1)
			assert.True(t, strings.HasPrefix(rep.Problems[0].String(), tc.reason), rep.Problems[0].String())
		})
	}
}

// A running Host's status reaches the report and /status: its state, its
// view of the fleet, the supervisors of the shards it runs.
func TestFleetInReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := shardtest.NewMemStore()
		t.Cleanup(func() { _ = store.Close(); time.Sleep(2 * time.Second) }) // protoactor's dead-letter throttle
		host, err := shard.NewHost(shard.Config{Prefix: "billing", Shards: shard.Range("tenant", 4), Store: store,
			Lease: lease.Config{OwnerID: "pod-a", TTL: 10 * time.Second}, Meta: map[string]string{"addr": "pod-a:80"},
			Workload: func(string) actors.Workload { return actors.WorkloadFunc(waitWithToken) }})
		require.NoError(t, err)
		reg := monitor.New(monitor.Config{Instance: "pod-a"})
		reg.AddFleet(host)
		assert.False(t, reg.Report().Ready, "a Host that has not started is not ready")

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- host.Run(ctx) }()
		defer func() { cancel(); require.NoError(t, <-done) }()
		for !host.Status().Balanced {
			time.Sleep(10 * time.Millisecond)
		}
		rep := reg.Report()
		assert.True(t, rep.Live)
		assert.True(t, rep.Ready)
		require.Len(t, rep.Fleets, 1)
		f := rep.Fleets[0]
		assert.Equal(t, shard.StateActive, f.State)
		assert.Equal(t, 4, f.Owned)
		require.Len(t, f.Shards, 4)
		require.NotNil(t, f.Shards[0].Local)
		assert.Equal(t, actors.StateLeading, f.Shards[0].Local.State)

		rec := httptest.NewRecorder()
		reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
		var body struct {
			Fleets []struct {
				Prefix   string `json:"prefix"`
				State    string `json:"state"`
				Owned    int    `json:"owned"`
				Balanced bool   `json:"balanced"`
			} `json:"fleets"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Len(t, body.Fleets, 1)
		assert.Equal(t, "billing", body.Fleets[0].Prefix)
		assert.Equal(t, "active", body.Fleets[0].State)
		assert.Equal(t, 4, body.Fleets[0].Owned)
		assert.True(t, body.Fleets[0].Balanced)
	})
}

func waitWithToken(ctx context.Context, _ lease.Token) error { <-ctx.Done(); return nil }
