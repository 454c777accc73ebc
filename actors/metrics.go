package actors

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meterName is the instrumentation scope of the lease actors' counters.
const meterName = "github.com/asterforge/aster/actors"

// Counter names. Every measurement carries the lease_id attribute.
const (
	MetricAcquisitions    = "aster.lease.acquisitions"
	MetricRenewals        = "aster.lease.renewals"
	MetricRenewalFailures = "aster.lease.renewal_failures"
	MetricLosses          = "aster.lease.losses"
	MetricHandovers       = "aster.lease.handovers"
)

// metrics holds a LeaseSupervisor's counters. They are fed from its events,
// so that what is counted and what is reported never disagree.
type metrics struct {
	acquisitions, renewals, renewalFailures, losses, handovers metric.Int64Counter
	attrs                                                      metric.MeasurementOption
}

// newMetrics creates the counters on mp (a no-op provider when nil).
func newMetrics(mp metric.MeterProvider, leaseID string) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(meterName)
	m := &metrics{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("lease_id", leaseID)))}
	for _, c := range []struct {
		dst        *metric.Int64Counter
		name, desc string
	}{
		{&m.acquisitions, MetricAcquisitions, "Leases acquired by this process."},
		{&m.renewals, MetricRenewals, "Successful lease renewals."},
		{&m.renewalFailures, MetricRenewalFailures, "Failed lease renewals (retried until the renew deadline)."},
		{&m.losses, MetricLosses, "Leases given up by a watchdog (poisoned)."},
		{&m.handovers, MetricHandovers, "Acquisitions of a lease that another owner was seen holding."},
	} {
		ctr, err := meter.Int64Counter(c.name, metric.WithDescription(c.desc), metric.WithUnit("{event}"))
		if err != nil {
			return nil, fmt.Errorf("actors: counter %s: %w", c.name, err)
		}
		*c.dst = ctr
	}
	return m, nil
}

// observe counts ev.
func (m *metrics) observe(ev Event) {
	ctx := context.Background()
	switch e := ev.(type) {
	case Acquired:
		m.acquisitions.Add(ctx, 1, m.attrs)
		if e.Handover {
			m.handovers.Add(ctx, 1, m.attrs)
		}
	case Renewed:
		m.renewals.Add(ctx, 1, m.attrs)
	case RenewalFailed:
		m.renewalFailures.Add(ctx, 1, m.attrs)
	case Poisoned:
		m.losses.Add(ctx, 1, m.attrs)
	}
}
