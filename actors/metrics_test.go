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

// measured is what a ManualReader collected from a supervisor.
type measured struct {
	sums       map[string]int64 // counters and up-down counters, by name
	monotonic  map[string]bool
	validities []float64 // the histogram's sum and count: {sum, count}
	count      uint64
	bounds     []float64
	attempts   map[string]uint64 // acquisition attempts measured, by outcome
}

// collect reads every instrument of the reader, checking the scope and the
// lease_id attribute.
func collect(t *testing.T, reader *sdkmetric.ManualReader) measured {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := measured{sums: map[string]int64{}, monotonic: map[string]bool{}, attempts: map[string]uint64{}}
	checkAttrs := func(set attribute.Set) {
		v, ok := set.Value(attribute.Key("lease_id"))
		require.True(t, ok)
		assert.Equal(t, testLease, v.AsString())
	}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, meterName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				out.monotonic[m.Name] = data.IsMonotonic
				for _, dp := range data.DataPoints {
					checkAttrs(dp.Attributes)
					out.sums[m.Name] += dp.Value
				}
			case metricdata.Histogram[float64]:
				assert.Equal(t, "s", m.Unit)
				if m.Name == metricAcquireLatency {
					for _, dp := range data.DataPoints {
						checkAttrs(dp.Attributes)
						o, _ := dp.Attributes.Value("outcome")
						out.attempts[o.AsString()] += dp.Count
					}
					continue
				}
				require.Equal(t, metricValidityRemaining, m.Name)
				for _, dp := range data.DataPoints {
					checkAttrs(dp.Attributes)
					out.validities = append(out.validities, dp.Sum)
					out.count += dp.Count
					out.bounds = dp.Bounds
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
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

		got := collect(t, reader).sums
		assert.Equal(t, int64(2), got[metricAcquisitions])
		assert.Equal(t, int64(1), got[metricHandovers], "only the first acquisition followed another owner")
		assert.Equal(t, int64(2), got[metricRenewalFailures])
		assert.Equal(t, int64(1), got[metricLosses])
		assert.Equal(t, int64(count[Renewed](r.rec)), got[metricRenewals])
		assert.GreaterOrEqual(t, got[metricRenewals], int64(3))
	})
}

func TestSupervisorLeaderGaugeAndValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()

		lc := lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: time.Second}
		cfg := r.config("node-a", (&counter{}).workload(), lc)
		cfg.MeterProvider = mp
		sup := r.supervisor(t, cfg)
		got := collect(t, reader)
		assert.Len(t, got.sums, 7, "every series exists from the start: %v", got.sums)
		assert.Equal(t, int64(0), got.sums[metricLeader], "not started")
		assert.False(t, got.monotonic[metricLeader], "a gauge: it goes up and down")

		run := start(sup)
		time.Sleep(5 * time.Second) // acquired at 0 s, renewed at 2 and 4 s
		synctest.Wait()
		got = collect(t, reader)
		assert.Equal(t, int64(1), got.sums[metricLeader])
		// Each on-time renewal leaves TTL - margin - renew period.
		left := (lc.TTL - lc.SafetyMargin - lc.RenewInterval).Seconds()
		assert.Equal(t, uint64(2), got.count)
		assert.InDelta(t, 2*left, got.validities[0], 1e-9)
		assert.Equal(t, validityBuckets, got.bounds)

		// Two failed renewals: the one that succeeds comes later, with less
		// validity left.
		r.faults.FailRenewals(2)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got = collect(t, reader)
		renewed, _ := all[Renewed](r.rec)
		require.Len(t, renewed, 3)
		assert.Equal(t, uint64(3), got.count)
		third := got.validities[0] - 2*left
		assert.Less(t, third, left, "later than on time")
		assert.Greater(t, third, 0.0)

		require.NoError(t, sup.Resign(context.Background(), time.Minute))
		synctest.Wait()
		assert.Equal(t, int64(0), collect(t, reader).sums[metricLeader], "resigned")

		// Lost: the store gives the lease to another term.
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, int64(1), collect(t, reader).sums[metricLeader], "leading again after the hold-off")
		r.faults.LoseRenewals(1)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int64(0), collect(t, reader).sums[metricLeader], "lost")
		assert.Equal(t, uint64(3), collect(t, reader).count, "a lost renewal measures nothing")

		// Acquired again once the lost term's key expired; then shut down.
		time.Sleep(15 * time.Second)
		synctest.Wait()
		require.Equal(t, int64(1), collect(t, reader).sums[metricLeader], "leading again")
		require.NoError(t, run.stop())
		got = collect(t, reader)
		assert.Equal(t, int64(0), got.sums[metricLeader], "released on shutdown")
		assert.Equal(t, int64(3), got.sums[metricAcquisitions])
		assert.Equal(t, uint64(3), got.attempts["acquired"], "every acquisition's round trip is measured")
		assert.Positive(t, got.attempts["held"], "and the attempts that found the lost term's key held")
	})
}
