package monitor

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/asterforge/aster/supervision"
)

// meterName is the instrumentation scope of the registry's instruments.
const meterName = "github.com/asterforge/aster/monitor"

// Instrument names. Every measurement carries the tree attribute (the root
// supervisor's name) and, for a supervisor's workload tree, lease_id.
const (
	// MetricChildren is the number of children of a tree in each state
	// (state attribute: running, backoff, ...), nested supervisors included
	// and the root excluded.
	MetricChildren = "aster.supervision.children"
	// MetricRestarts is the number of restarts of a tree's children so far.
	// It counts from 0 again when a tree is started anew (a workload tree
	// is built for every term), which metric backends read as a counter
	// reset.
	MetricRestarts = "aster.supervision.restarts"
	// MetricStoreEvents is the number of events a store reported
	// (Registry.StoreEvent), with the store and kind (the event's type,
	// as "natsstore.WatchStalled") attributes instead of tree.
	MetricStoreEvents = "aster.store.events"
)

// RegisterMetrics registers observable instruments on mp that read the
// registered trees' snapshots (the supervisors' workload trees included)
// and the stores' event counts whenever a reader collects. Unregister the returned Registration to
// stop. Snapshots never wait for a supervisor.
func (r *Registry) RegisterMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	if mp == nil {
		return nil, fmt.Errorf("monitor: metrics: nil MeterProvider")
	}
	meter := mp.Meter(meterName)
	children, err := meter.Int64ObservableGauge(MetricChildren, metric.WithUnit("{child}"),
		metric.WithDescription("Children of a supervision tree, by state."))
	if err != nil {
		return nil, fmt.Errorf("monitor: instrument %s: %w", MetricChildren, err)
	}
	restarts, err := meter.Int64ObservableCounter(MetricRestarts, metric.WithUnit("{restart}"),
		metric.WithDescription("Restarts of a supervision tree's children since the tree started."))
	if err != nil {
		return nil, fmt.Errorf("monitor: instrument %s: %w", MetricRestarts, err)
	}
	events, err := meter.Int64ObservableCounter(MetricStoreEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Events a lease store reported, by kind."))
	if err != nil {
		return nil, fmt.Errorf("monitor: instrument %s: %w", MetricStoreEvents, err)
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r.mu.Lock()
		stores := slices.Clone(r.stores)
		r.mu.Unlock()
		for _, e := range stores {
			for _, c := range e.counts() {
				o.ObserveInt64(events, c.Count, metric.WithAttributes(attribute.String("store", e.name),
					attribute.String("kind", c.Kind)))
			}
		}
		for _, t := range r.snapshots() {
			base := []attribute.KeyValue{attribute.String("tree", t.snap.Name)}
			if t.leaseID != "" {
				base = append(base, attribute.String("lease_id", t.leaseID))
			}
			counts := map[supervision.State]int64{}
			var n int64
			walk(t.snap, func(s supervision.Snapshot, root bool) {
				n += int64(s.Restarts)
				if !root {
					counts[s.State]++
				}
			})
			o.ObserveInt64(restarts, n, metric.WithAttributes(base...))
			for st := supervision.StateStopped; st <= supervision.StateFailed; st++ {
				attrs := append(append([]attribute.KeyValue(nil), base...), attribute.String("state", st.String()))
				o.ObserveInt64(children, counts[st], metric.WithAttributes(attrs...))
			}
		}
		return nil
	}, children, restarts, events)
}

type leaseTree struct {
	leaseID string
	snap    supervision.Snapshot
}

// snapshots returns the snapshots of every tree, workload trees first.
func (r *Registry) snapshots() []leaseTree {
	r.mu.Lock()
	sups, trees := append([]supEntry(nil), r.sups...), append([]Tree(nil), r.trees...)
	r.mu.Unlock()
	var out []leaseTree
	for _, e := range sups {
		if t := e.sup.Tree(); t != nil {
			out = append(out, leaseTree{leaseID: e.sup.Status().LeaseID, snap: t.Snapshot()})
		}
	}
	for _, t := range trees {
		out = append(out, leaseTree{snap: t.Snapshot()})
	}
	return out
}

// walk calls fn for s and every node below it.
func walk(s supervision.Snapshot, fn func(s supervision.Snapshot, root bool)) {
	var rec func(s supervision.Snapshot, root bool)
	rec = func(s supervision.Snapshot, root bool) {
		fn(s, root)
		for _, c := range s.Children {
			rec(c, false)
		}
	}
	rec(s, true)
}
