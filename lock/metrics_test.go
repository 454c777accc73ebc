package lock_test

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

	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// lockMetrics is what a ManualReader collected from Lockers.
type lockMetrics struct {
	held  int64
	waits map[string]metricdata.HistogramDataPoint[float64] // by outcome
}

func readLockMetrics(t *testing.T, reader *sdkmetric.ManualReader) lockMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := lockMetrics{waits: map[string]metricdata.HistogramDataPoint[float64]{}}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/asterforge/aster/lock", sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch m.Name {
			case lock.MetricHeld:
				sum, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok)
				assert.False(t, sum.IsMonotonic)
				for _, dp := range sum.DataPoints {
					out.held += dp.Value
				}
			case lock.MetricWait:
				h, ok := m.Data.(metricdata.Histogram[float64])
				require.True(t, ok)
				assert.Equal(t, "s", m.Unit)
				for _, dp := range h.DataPoints {
					v, ok := dp.Attributes.Value(attribute.Key("outcome"))
					require.True(t, ok)
					out.waits[v.AsString()] = dp
				}
			default:
				t.Errorf("unexpected instrument %s", m.Name)
			}
		}
	}
	return out
}

func TestLockMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{TTL: 10 * time.Second, MeterProvider: mp})
		b := newRigOn(t, mem, lock.Config{TTL: 10 * time.Second, MeterProvider: mp})

		ga, err := a.locker.Acquire(t.Context(), "invoice.42")
		require.NoError(t, err)
		_, err = a.locker.Acquire(t.Context(), "invoice.43")
		require.NoError(t, err)
		synctest.Wait()
		got := readLockMetrics(t, reader)
		assert.Equal(t, int64(2), got.held)
		assert.Equal(t, uint64(2), got.waits["acquired"].Count)
		assert.Zero(t, got.waits["acquired"].Sum, "free locks are taken at once")

		_, err = b.locker.TryAcquire(t.Context(), "invoice.42")
		assert.ErrorIs(t, err, lock.ErrHeld)

		// node-b waits 3 s for node-a's release.
		done := make(chan error, 1)
		go func() {
			g, err := b.locker.Acquire(t.Context(), "invoice.42")
			if err == nil {
				defer func() { _ = g.Release(context.Background()) }()
			}
			done <- err
		}()
		time.Sleep(3 * time.Second)
		require.NoError(t, ga.Release(t.Context()))
		require.NoError(t, <-done)

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = b.locker.Acquire(ctx, "invoice.43")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		synctest.Wait()

		got = readLockMetrics(t, reader)
		assert.Equal(t, int64(1), got.held, "invoice.43 is held; invoice.42 was released twice")
		assert.Equal(t, uint64(3), got.waits["acquired"].Count)
		assert.InDelta(t, 3.0, got.waits["acquired"].Sum, 1e-9, "node-b waited 3 s")
		assert.Equal(t, uint64(1), got.waits["held"].Count)
		assert.Equal(t, uint64(1), got.waits["canceled"].Count)
		assert.InDelta(t, 2.0, got.waits["canceled"].Sum, 1e-9)
		assert.NotContains(t, got.waits, "failed")

		require.NoError(t, a.locker.Close(t.Context()))
		synctest.Wait()
		assert.Zero(t, readLockMetrics(t, reader).held, "Close releases what it held")
	})
}
