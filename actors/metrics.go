package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/asterforge/aster/lease"
)

// meterName is the instrumentation scope of the lease actors' instruments.
const meterName = "github.com/asterforge/aster/actors"

// Instrument names. Every measurement carries the lease_id attribute.
const (
	metricAcquisitions = "aster.lease.acquisitions"
	// metricAcquireLatency is the round trip of one acquisition attempt,
	// by outcome (acquired, held, failed).
	metricAcquireLatency  = "aster.lease.acquire_latency"
	metricRenewals        = "aster.lease.renewals"
	metricRenewalFailures = "aster.lease.renewal_failures"
	metricLosses          = "aster.lease.losses"
	metricHandovers       = "aster.lease.handovers"
	// metricResumptions counts lapsed terms that went on: their renewals
	// failed until the renew deadline, but the store still held the lease.
	metricResumptions = "aster.lease.resumptions"
	// metricLeader is 1 while this process holds the lease (from its
	// acquisition to its release, loss or expiry) and 0 otherwise: summed
	// over a fleet, the number of holders.
	metricLeader = "aster.lease.leader"
	// metricValidityRemaining is a histogram of how much validity the
	// lease had left when each renewal succeeded, in seconds: about TTL -
	// safety margin - renew period when renewals are on time, near 0 when
	// the lease almost lapsed.
	metricValidityRemaining = "aster.lease.validity_remaining"
)

// validityBuckets are the histogram boundaries of metricValidityRemaining,
// in seconds: lease TTLs are seconds to minutes.
var validityBuckets = []float64{0, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120, 300}

// metrics holds a LeaseSupervisor's instruments. They are fed from its
// events, so that what is measured and what is reported never disagree.
type metrics struct {
	acquisitions, renewals, renewalFailures, losses, handovers, resumptions metric.Int64Counter
	leader                                                                  metric.Int64UpDownCounter
	validity, acquireLatency                                                metric.Float64Histogram
	outcomes                                                                map[string]metric.MeasurementOption
	attrs                                                                   metric.MeasurementOption

	// The supervisor and its watchdog report concurrently.
	mu         sync.Mutex
	leading    lease.Token // the token of the term counted as leading, 0 if none
	validUntil time.Time   // the leading term's validity before its next renewal
}

// newMetrics creates the instruments on mp (a no-op provider when nil).
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
		{&m.acquisitions, metricAcquisitions, "Leases acquired by this process."},
		{&m.renewals, metricRenewals, "Successful lease renewals."},
		{&m.renewalFailures, metricRenewalFailures, "Failed lease renewals (retried until the renew deadline)."},
		{&m.losses, metricLosses, "Leases given up by a watchdog (poisoned)."},
		{&m.handovers, metricHandovers, "Acquisitions of a lease that another owner was seen holding."},
		{&m.resumptions, metricResumptions, "Lapsed leases renewed again with the same token: terms whose renewals " +
			"failed until the renew deadline while the store kept the lease."},
	} {
		ctr, err := meter.Int64Counter(c.name, metric.WithDescription(c.desc), metric.WithUnit("{event}"))
		if err != nil {
			return nil, fmt.Errorf("actors: counter %s: %w", c.name, err)
		}
		*c.dst = ctr
	}
	var err error
	m.leader, err = meter.Int64UpDownCounter(metricLeader, metric.WithUnit("{lease}"),
		metric.WithDescription("1 while this process holds the lease, 0 otherwise."))
	if err != nil {
		return nil, fmt.Errorf("actors: gauge %s: %w", metricLeader, err)
	}
	// Every series exists from the start, at 0, so that alerts on rates
	// and absences work before the first event.
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{m.acquisitions, m.renewals, m.renewalFailures, m.losses, m.handovers, m.resumptions} {
		c.Add(ctx, 0, m.attrs)
	}
	m.leader.Add(ctx, 0, m.attrs)
	m.validity, err = meter.Float64Histogram(metricValidityRemaining, metric.WithUnit("s"),
		metric.WithDescription("Validity the lease had left when a renewal succeeded."),
		metric.WithExplicitBucketBoundaries(validityBuckets...))
	if err != nil {
		return nil, fmt.Errorf("actors: histogram %s: %w", metricValidityRemaining, err)
	}
	m.acquireLatency, err = meter.Float64Histogram(metricAcquireLatency, metric.WithUnit("s"),
		metric.WithDescription("Round trip of one acquisition attempt, by outcome (acquired, held, failed)."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
	if err != nil {
		return nil, fmt.Errorf("actors: histogram %s: %w", metricAcquireLatency, err)
	}
	m.outcomes = make(map[string]metric.MeasurementOption, 3)
	for _, o := range []string{"acquired", "held", "failed"} {
		m.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("lease_id", leaseID), attribute.String("outcome", o)))
	}
	return m, nil
}

// attempted measures one acquisition attempt that took d.
func (m *metrics) attempted(d time.Duration, outcome string) {
	m.acquireLatency.Record(context.Background(), d.Seconds(), m.outcomes[outcome])
}

// observe measures ev.
func (m *metrics) observe(ev Event) {
	ctx := context.Background()
	switch e := ev.(type) {
	case Acquired:
		switch {
		case e.Resumed:
			m.resumptions.Add(ctx, 1, m.attrs)
		default:
			m.acquisitions.Add(ctx, 1, m.attrs)
		}
		if e.Handover {
			m.handovers.Add(ctx, 1, m.attrs)
		}
		m.lead(ctx, e.Token, e.ValidUntil)
	case Renewed:
		m.renewals.Add(ctx, 1, m.attrs)
		m.renewed(ctx, e.Token, e.ValidUntil)
	case RenewalFailed:
		m.renewalFailures.Add(ctx, 1, m.attrs)
	case Poisoned:
		m.losses.Add(ctx, 1, m.attrs)
		m.end(ctx, e.Token)
	case Released:
		m.end(ctx, e.Token)
	case NotReleased:
		m.end(ctx, e.Token)
	case SteppedDown:
		m.end(ctx, e.Token)
	}
}

// lead counts the term of token as leading.
func (m *metrics) lead(ctx context.Context, token lease.Token, validUntil time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leading == 0 {
		m.leader.Add(ctx, 1, m.attrs)
	}
	m.leading, m.validUntil = token, validUntil
}

// renewed records the validity the term of token had left.
func (m *metrics) renewed(ctx context.Context, token lease.Token, validUntil time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if token != m.leading {
		return
	}
	m.validity.Record(ctx, max(time.Until(m.validUntil), 0).Seconds(), m.attrs)
	m.validUntil = validUntil
}

// end stops counting the term of token as leading. (Every term ends with
// Poisoned, Released or NotReleased; SteppedDown follows them.)
func (m *metrics) end(ctx context.Context, token lease.Token) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leading == 0 || token != m.leading {
		return
	}
	m.leader.Add(ctx, -1, m.attrs)
	m.leading, m.validUntil = 0, time.Time{}
}
