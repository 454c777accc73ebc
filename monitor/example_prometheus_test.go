package monitor_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/supervision"
)

// The lease, lock and tree instruments, exported to Prometheus with
// OpenTelemetry's Prometheus exporter and scraped from /metrics.
func Example_prometheus() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One MeterProvider for everything, read by the Prometheus exporter.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	store := leasetest.NewMemStore() // natsstore.Store in production
	defer store.Close()
	acquired := make(chan struct{}, 1)
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease:         lease.Config{LeaseID: "billing.outbox", OwnerID: "pod-a", TTL: 10 * time.Second},
		Store:         store,
		Workload:      actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error { <-ctx.Done(); return nil }),
		MeterProvider: mp, // the lease instruments
		OnEvent: func(ev actors.Event) {
			if _, ok := ev.(actors.Acquired); ok {
				acquired <- struct{}{}
			}
		},
	})
	if err != nil {
		panic(err)
	}
	locker, err := lock.New(store, lock.Config{MeterProvider: mp}) // the lock instruments
	if err != nil {
		panic(err)
	}
	defer func() { _ = locker.Close(context.Background()) }()
	tree, err := supervision.New(supervision.Spec{Name: "jobs", Children: []supervision.ChildSpec{
		{Name: "mailer", Func: func(ctx context.Context) error { <-ctx.Done(); return nil }},
	}}, supervision.Options{})
	if err != nil {
		panic(err)
	}
	reg := monitor.New(monitor.Config{Instance: "pod-a"})
	reg.AddTree(tree)
	if _, err := reg.RegisterMetrics(mp); err != nil { // the tree instruments
		panic(err)
	}

	runDone := make(chan error, 2)
	go func() { runDone <- sup.Run(ctx) }()
	go func() { runDone <- tree.Run(ctx) }()
	<-acquired
	if err := tree.WaitRunning(ctx); err != nil {
		panic(err)
	}
	g, err := locker.Acquire(ctx, "invoice.42")
	if err != nil {
		panic(err)
	}
	defer func() { _ = g.Release(context.Background()) }()

	// What Prometheus scrapes.
	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "aster_") && !strings.Contains(line, "_bucket") &&
			(strings.Contains(line, "leader") || strings.Contains(line, "acquisitions") ||
				strings.Contains(line, "acquire_latency_seconds_count") ||
				strings.Contains(line, "lock_held") || strings.Contains(line, "lock_wait_seconds_count") ||
				strings.Contains(line, `state="running"`)) {
			fmt.Println(line)
		}
	}
	cancel()
	<-runDone
	<-runDone
	// Output:
	// aster_lease_acquire_latency_seconds_count{lease_id="billing.outbox",outcome="acquired"} 1
	// aster_lease_acquisitions_total{lease_id="billing.outbox"} 1
	// aster_lease_leader{lease_id="billing.outbox"} 1
	// aster_lock_held 1
	// aster_lock_wait_seconds_count{outcome="acquired"} 1
	// aster_supervision_children{state="running",tree="jobs"} 1
}
