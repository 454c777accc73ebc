package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

var (
	_ monitor.Store = (*natsstore.Store)(nil)
	_ fmt.Stringer  = natsstore.Event(nil)
)

type fakeStore struct{ err atomic.Pointer[error] }

func (s *fakeStore) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// A store that stopped for good makes the process not live (and so not
// ready): only a restart opens it again, and Run has returned or is
// returning with its error (actors.ErrStoreStopped), so let the process
// supervisor or Kubernetes restart the process rather than leave it not
// ready until someone does by hand.
func TestStoppedStoreIsNotLive(t *testing.T) {
	reg := monitor.New(monitor.Config{Instance: "i1"})
	s := &fakeStore{}
	reg.AddStore("leases", s)
	rep := reg.Report()
	assert.True(t, rep.Ready)
	require.Len(t, rep.Stores, 1)
	assert.Equal(t, monitor.StoreReport{Name: "leases"}, rep.Stores[0])

	err := errors.New(`natsstore: bucket "leases" is unusable (deleted)`)
	s.err.Store(&err)
	rep = reg.Report()
	assert.False(t, rep.Live)
	assert.False(t, rep.Ready)
	assert.Equal(t, []monitor.Problem{{Check: monitor.CheckLive, Subject: "store leases",
		Reason: "stopped for good, a restart is needed: " + err.Error()}}, rep.Problems)
	assert.Equal(t, err.Error(), rep.Stores[0].Error)
}

// Events are counted by type, with the last of each, in the report and as
// a metric; a store's events and its state share one entry.
func TestStoreEventsAreCounted(t *testing.T) {
	reg := monitor.New(monitor.Config{Instance: "i1"})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	_, err := reg.RegisterMetrics(mp)
	require.NoError(t, err)

	reg.StoreEvent("leases", natsstore.WatchStalled{Bucket: "leases", Key: "a"})
	reg.StoreEvent("leases", natsstore.ServerIsolated{Bucket: "leases", Server: "nats://127.0.0.1:4222"})
	last := natsstore.WatchStalled{Bucket: "leases", Key: "b"}
	reg.StoreEvent("leases", last)
	reg.StoreEvent("leases", nil)
	reg.AddStore("leases", &fakeStore{})

	rep := reg.Report()
	require.Len(t, rep.Stores, 1)
	ev := rep.Stores[0].Events
	require.Len(t, ev, 2)
	assert.Equal(t, "natsstore.ServerIsolated", ev[0].Kind)
	assert.Equal(t, int64(1), ev[0].Count)
	assert.Equal(t, "natsstore.WatchStalled", ev[1].Kind)
	assert.Equal(t, int64(2), ev[1].Count)
	assert.Equal(t, last.String(), ev[1].Last)
	assert.False(t, ev[1].At.IsZero())
	assert.True(t, rep.Ready)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != monitor.MetricStoreEvents {
				continue
			}
			sum := m.Data.(metricdata.Sum[int64])
			assert.True(t, sum.IsMonotonic)
			for _, dp := range sum.DataPoints {
				store, _ := dp.Attributes.Value(attribute.Key("store"))
				kind, _ := dp.Attributes.Value(attribute.Key("kind"))
				got[[2]string{store.AsString(), kind.AsString()}] = dp.Value
			}
		}
	}
	assert.Equal(t, map[[2]string]int64{{"leases", "natsstore.ServerIsolated"}: 1,
		{"leases", "natsstore.WatchStalled"}: 2}, got)
}
