package shard

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meterName is the instrumentation scope of the Host's metrics.
const meterName = "github.com/asterforge/aster/shard"

// Metric names. Every measurement carries the fleet attribute (the
// Config.Prefix). The lease supervisors of the shards report their own
// instruments (aster.lease.acquisitions and the others, see
// actors.SupervisorConfig.MeterProvider), by lease_id.
const (
	// MetricShardsOwned is a gauge: the shards this instance leads.
	MetricShardsOwned = "aster.shard.owned"
	// MetricShardsTarget is a gauge: the shards placed on this instance.
	MetricShardsTarget = "aster.shard.target"
	// MetricMembers is a gauge: the members this instance sees.
	MetricMembers = "aster.shard.members"
	// MetricMovedIn counts the shards this instance took over from another
	// member.
	MetricMovedIn = "aster.shard.moved_in"
	// MetricHandedOver counts the shards this instance handed over.
	MetricHandedOver = "aster.shard.handed_over"
	// MetricTimeToBalance is a histogram, in seconds: how long this
	// instance's view took to become balanced after it stopped being so.
	MetricTimeToBalance = "aster.shard.time_to_balance"
)

// metrics holds a Host's instruments.
type metrics struct {
	moved, handed metric.Int64Counter
	balance       metric.Float64Histogram
	attrs         metric.MeasurementOption
}

// newMetrics creates the instruments on mp (a no-op provider when nil);
// the gauges read status when they are collected.
func newMetrics(mp metric.MeterProvider, fleet string, status func() Status) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(meterName)
	attrs := attribute.NewSet(attribute.String("fleet", fleet))
	m := &metrics{attrs: metric.WithAttributeSet(attrs)}
	var err error
	if m.moved, err = meter.Int64Counter(MetricMovedIn, metric.WithUnit("{shard}"),
		metric.WithDescription("Shards this instance took over from another member.")); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", MetricMovedIn, err)
	}
	if m.handed, err = meter.Int64Counter(MetricHandedOver, metric.WithUnit("{shard}"),
		metric.WithDescription("Shards this instance handed over to another member.")); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", MetricHandedOver, err)
	}
	if m.balance, err = meter.Float64Histogram(MetricTimeToBalance, metric.WithUnit("s"),
		metric.WithDescription("How long this instance's view of the fleet took to become balanced.")); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", MetricTimeToBalance, err)
	}
	for _, g := range []struct {
		name, desc string
		read       func(Status) int
	}{
		{MetricShardsOwned, "Shards this instance leads.", func(s Status) int { return s.Owned }},
		{MetricShardsTarget, "Shards placed on this instance.", func(s Status) int { return s.Target }},
		{MetricMembers, "Members of the fleet this instance sees.", func(s Status) int { return len(s.Members) }},
	} {
		read := g.read
		if _, err := meter.Int64ObservableGauge(g.name, metric.WithDescription(g.desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(int64(read(status())), metric.WithAttributeSet(attrs))
				return nil
			})); err != nil {
			return nil, fmt.Errorf("shard: %s: %w", g.name, err)
		}
	}
	return m, nil
}

func (m *metrics) movedIn()    { m.moved.Add(context.Background(), 1, m.attrs) }
func (m *metrics) handedOver() { m.handed.Add(context.Background(), 1, m.attrs) }
func (m *metrics) balanced(took time.Duration) {
	m.balance.Record(context.Background(), took.Seconds(), m.attrs)
}
