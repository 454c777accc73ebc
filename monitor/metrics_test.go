package monitor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/supervision"
)

// treeMetrics reads the registry's instruments: children by tree and
// state, restarts by tree, and the lease_id of each tree.
func treeMetrics(t *testing.T, reader *sdkmetric.ManualReader) (children map[[2]string]int64, restarts map[string]int64, leases map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	children, restarts, leases = map[[2]string]int64{}, map[string]int64{}, map[string]string{}
	attr := func(s attribute.Set, k string) string { v, _ := s.Value(attribute.Key(k)); return v.AsString() }
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/asterforge/aster/monitor", sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch m.Name {
			case monitor.MetricChildren:
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					children[[2]string{attr(dp.Attributes, "tree"), attr(dp.Attributes, "state")}] = dp.Value
				}
			case monitor.MetricRestarts:
				sum := m.Data.(metricdata.Sum[int64])
				assert.True(t, sum.IsMonotonic)
				for _, dp := range sum.DataPoints {
					tree := attr(dp.Attributes, "tree")
					restarts[tree] = dp.Value
					leases[tree] = attr(dp.Attributes, "lease_id")
				}
			case monitor.MetricStoreEvents: // store_test.go
			default:
				t.Errorf("unexpected instrument %s", m.Name)
			}
		}
	}
	return children, restarts, leases
}

func TestTreeMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		store := leasetest.NewMemStore()
		t.Cleanup(func() { _ = store.Close(); time.Sleep(2 * time.Second) })

		fails := 0
		jobs, err := supervision.New(supervision.Spec{Name: "jobs", Children: []supervision.ChildSpec{
			{Name: "flaky", Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second, Jitter: supervision.NoJitter},
				Func: func(ctx context.Context) error {
					if fails < 2 {
						fails++
						return errors.New("flaky failed")
					}
					return waitForever(ctx)
				}},
			{Name: "nested", Tree: &supervision.Spec{Children: []supervision.ChildSpec{{Name: "leaf", Func: waitForever}}}},
		}}, supervision.Options{})
		require.NoError(t, err)
		var outbox atomic.Pointer[supervision.Tree]
		sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
			Lease: lease.Config{LeaseID: "billing.outbox", OwnerID: "pod-a", TTL: 10 * time.Second},
			Store: store, Workload: outboxTree(&outbox)})
		require.NoError(t, err)

		reg := monitor.New(monitor.Config{Instance: "pod-a"})
		reg.AddTree(jobs)
		reg.AddSupervisor(sup)
		registration, err := reg.RegisterMetrics(mp)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- jobs.Run(ctx) }()
		run(t, sup)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()

		children, restarts, leases := treeMetrics(t, reader)
		assert.Equal(t, int64(1), children[[2]string{"jobs", "backoff"}], "flaky waits for its restart")
		assert.Equal(t, int64(2), children[[2]string{"jobs", "running"}], "nested and its leaf")
		assert.Equal(t, int64(0), children[[2]string{"jobs", "failed"}], "every state is reported")
		assert.Equal(t, int64(0), restarts["jobs"], "failed, not restarted yet")
		assert.Equal(t, int64(2), children[[2]string{"outbox", "running"}])
		assert.Equal(t, "billing.outbox", leases["outbox"])
		assert.Empty(t, leases["jobs"])

		time.Sleep(5 * time.Second)
		synctest.Wait()
		children, restarts, _ = treeMetrics(t, reader)
		assert.Equal(t, int64(0), children[[2]string{"jobs", "backoff"}])
		assert.Equal(t, int64(3), children[[2]string{"jobs", "running"}])
		assert.Equal(t, int64(2), restarts["jobs"])

		require.NoError(t, registration.Unregister())
		children, _, _ = treeMetrics(t, reader)
		assert.Empty(t, children, "unregistered")
		cancel()
		require.NoError(t, <-done)
	})
}
