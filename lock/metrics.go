package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meterName is the instrumentation scope of the lock instruments.
const meterName = "github.com/asterforge/aster/lock"

// Instrument names.
const (
	// MetricHeld is the number of locks held, with a lease of their own or
	// under a live session (an up-down counter: Locker.Held, summed over
	// the process's Lockers).
	MetricHeld = "aster.lock.held"
	// MetricWait is a histogram of how long Acquire and TryAcquire calls
	// took, in seconds, with an outcome attribute: acquired, held (a
	// TryAcquire that found the lock held), canceled (the context ended
	// first) or failed.
	MetricWait = "aster.lock.wait"
)

// waitBuckets are the boundaries of MetricWait, in seconds.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// metrics holds a Locker's instruments.
type metrics struct {
	held     metric.Int64UpDownCounter
	wait     metric.Float64Histogram
	outcomes map[string]metric.MeasurementOption // the attribute of each outcome
}

// heldCount counts the locks a Locker holds (Locker.Held) and reports the
// changes to MetricHeld.
type heldCount struct {
	n     atomic.Int64
	gauge metric.Int64UpDownCounter
}

// add changes the count by d.
func (h *heldCount) add(d int64) {
	h.n.Add(d)
	h.gauge.Add(context.Background(), d)
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(meterName)
	var (
		m   = metrics{outcomes: map[string]metric.MeasurementOption{}}
		err error
	)
	for _, o := range []string{"acquired", "held", "canceled", "failed"} {
		m.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	m.held, err = meter.Int64UpDownCounter(MetricHeld, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held, with a lease of their own or under a live session."))
	if err != nil {
		return nil, fmt.Errorf("lock: instrument %s: %w", MetricHeld, err)
	}
	m.wait, err = meter.Float64Histogram(MetricWait, metric.WithUnit("s"),
		metric.WithDescription("How long Acquire and TryAcquire calls took, by outcome."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return nil, fmt.Errorf("lock: instrument %s: %w", MetricWait, err)
	}
	return &m, nil
}

// waited records an Acquire or TryAcquire call that started at start and
// returned err.
func (m *metrics) waited(start time.Time, err error) {
	outcome := "acquired"
	switch {
	case err == nil:
	case errors.Is(err, ErrHeld):
		outcome = "held"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = "canceled"
	default:
		outcome = "failed"
	}
	m.wait.Record(context.Background(), time.Since(start).Seconds(), m.outcomes[outcome])
}
