package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// collect returns every int64 counter of the reader, by name, checking the
// lease_id attribute.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, meterName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, m.Name)
			for _, dp := range sum.DataPoints {
				v, ok := dp.Attributes.Value(attribute.Key("lease_id"))
				require.True(t, ok)
				assert.Equal(t, testLease, v.AsString())
				out[m.Name] += dp.Value
			}
		}
	}
	return out
}

func TestSupervisorCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()

		r.mem.Tamper(testLease, "node-b", 5*time.Second) // another owner first: a handover
		cfg := r.config("node-a", (&counter{}).workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.MeterProvider = mp
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}}
		run := start(r.supervisor(t, cfg))
		time.Sleep(10 * time.Second) // acquired at 5 s, renewed at 7 and 9 s
		r.faults.FailRenewals(2)
		time.Sleep(2 * time.Second) // two failures, then a renewal
		r.faults.LoseRenewals(1)
		// Lost (the store still holds the old term's key, which no other
		// term may take), then acquired again once that key expired.
		time.Sleep(12 * time.Second)
		require.NoError(t, run.stop())

		got := collect(t, reader)
		assert.Equal(t, int64(2), got[MetricAcquisitions])
		assert.Equal(t, int64(1), got[MetricHandovers], "only the first acquisition followed another owner")
		assert.Equal(t, int64(2), got[MetricRenewalFailures])
		assert.Equal(t, int64(1), got[MetricLosses])
		assert.Equal(t, int64(count[Renewed](r.rec)), got[MetricRenewals])
		assert.GreaterOrEqual(t, got[MetricRenewals], int64(3))
	})
}
