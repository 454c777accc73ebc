// Command service is a sample service to run in Kubernetes (see
// deploy/kubernetes): a singleton (an actors.LeaseSupervisor running a
// small supervision tree while it holds its lease) with a monitor.Registry
// that serves the liveness and readiness probes and /aster/status over
// HTTP, the lease, tree and store metrics for Prometheus on /metrics, and
// registers the monitor's NATS micro service, so that `aster
// status` and `aster tree` find every instance.
//
// Its owner identity and lease metadata come from the pod (POD_NAME,
// POD_NAMESPACE and NODE_NAME, set through the downward API); outside a pod
// the owner is a fresh lease.NewOwnerID and the instance is named after
// the host. Without -nats-url (NATS_URL) it starts an embedded NATS
// server on 127.0.0.1, so that it can be tried on one machine:
//
//	go run ./examples/service -duration 1m
//	go run ./cmd/aster status --server nats://127.0.0.1:PORT   # the URL it logs
//
// On SIGTERM (or at the end of -duration) it resigns the lease, so that
// another replica takes over at once, then stops; deploy/kubernetes
// explains the grace period this takes (settings.GracePeriod).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/examples/service/settings"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
	"github.com/asterforge/aster/supervision"
)

func main() {
	s, err := settings.ParseOS(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, s, newLogger(os.Stderr), nil); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

// newLogger logs as text to a terminal (tint), as JSON otherwise (a
// container's log collector).
func newLogger(w *os.File) *slog.Logger {
	if fi, err := w.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return slog.New(tint.NewTextHandler(w, &tint.Options{TimeFormat: "15:04:05.000", NoColor: os.Getenv("NO_COLOR") != ""}))
	}
	return slog.New(slog.NewJSONHandler(w, nil))
}

// started is what a running service tells its caller (the test): where it
// serves HTTP, and the NATS servers it uses.
type started struct {
	HTTPAddr string
	NATSURLs []string
}

// run runs one instance until ctx ends, s.Duration passes, or the lease
// supervisor gives up; then it resigns and stops everything it started.
// ready, when not nil, is called once everything is up.
func run(ctx context.Context, s settings.Settings, log *slog.Logger, ready func(started)) (err error) {
	log = log.With("instance", s.Instance)
	if s.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Duration)
		defer cancel()
	}

	// 1. NATS: the deployment's, or an embedded server.
	urls := s.NATSURLs
	if len(urls) == 0 {
		ns, err := embedded.Start(ctx, embedded.Config{ServerName: "aster-service"})
		if err != nil {
			return fmt.Errorf("starting the embedded NATS server: %w", err)
		}
		defer func() { _ = ns.Close() }()
		urls = []string{ns.ClientURL()}
		log.Info("embedded NATS server started (no NATS_URL): try aster status --server "+ns.ClientURL(), "url", ns.ClientURL())
	}

	// 2. The monitor, the metrics, and the lease store reporting to them.
	reg := monitor.New(monitor.Config{Instance: s.Instance})
	promReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(promReg), otelprom.WithoutScopeInfo())
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	if _, err := reg.RegisterMetrics(mp); err != nil {
		return err
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	store, err := natsstore.Dial(dctx, natsstore.DialOptions{
		URLs: urls, Name: s.Instance, CredentialsFile: s.CredsFile, RetryConnect: true,
	}, natsstore.Config{
		Bucket: s.Bucket, Replicas: s.Replicas, Logger: log, CloseTimeout: settings.StoreCloseTimeout,
		OnEvent: func(ev natsstore.Event) { reg.StoreEvent(s.Bucket, ev) },
	})
	dcancel()
	if err != nil {
		return fmt.Errorf("opening the lease store: %w", err)
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the lease store: %w", cerr))
		}
	}()
	reg.AddStore(s.Bucket, store)

	// 3. The singleton.
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease:         s.Lease,
		Store:         store,
		Meta:          s.Meta,
		Workload:      actors.WorkloadTree(func(g actors.Granted) (*supervision.Tree, error) { return workTree(g, log) }),
		Logger:        log,
		MeterProvider: mp,
	})
	if err != nil {
		return err
	}
	reg.AddSupervisor(sup)

	// 4. The monitor's NATS micro service, on a connection of its own.
	opts := []nats.Option{nats.Name(s.Instance + "-monitor"), nats.MaxReconnects(-1)}
	if s.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		return fmt.Errorf("connecting the monitor service to NATS: %w", err)
	}
	defer nc.Close()
	svc, err := reg.Service(nc, monitor.ServiceConfig{})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()

	// 5. The probes and the status over HTTP.
	ln, err := net.Listen("tcp", s.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening for the probes: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(settings.PathPrefix+"/", http.StripPrefix(settings.PathPrefix, reg.Handler()))
	mux.Handle(settings.MetricsPath, promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), settings.HTTPShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()

	// 6. Run until told to stop.
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- sup.Run(runCtx) }()
	log.Info("service started", "owner_id", s.Lease.OwnerID, "lease_id", s.Lease.LeaseID, "meta", s.Meta,
		"http", ln.Addr().String(), "monitor_service", monitor.DefaultServiceName+" "+svc.Info().ID)
	if ready != nil {
		ready(started{HTTPAddr: ln.Addr().String(), NATSURLs: urls})
	}
	select {
	case err := <-ran: // gave up: let it crash, the Deployment restarts the pod
		return fmt.Errorf("the lease supervisor stopped: %w", err)
	case err := <-served:
		stopRun()
		return errors.Join(fmt.Errorf("the HTTP server stopped: %w", err), <-ran)
	case <-ctx.Done():
	}

	// 7. Hand the lease over while this process still runs, then stop.
	log.Info("stopping: resigning the lease", "cause", context.Cause(ctx))
	rctx, rcancel := context.WithTimeout(context.Background(), settings.ResignTimeout(s.Lease))
	if rerr := sup.Resign(rctx, settings.HoldOff(s.Lease)); rerr != nil {
		log.Warn("resign failed; stopping anyway", "error", rerr)
	}
	rcancel()
	stopRun()
	if err := <-ran; err != nil {
		return fmt.Errorf("the lease supervisor: %w", err)
	}
	log.Info("stopped")
	return nil
}

// workTree is the singleton's workload: a supervision tree of two
// children, for `aster tree` to show. heartbeat logs the token now and
// then; worker stands for the real work.
func workTree(g actors.Granted, log *slog.Logger) (*supervision.Tree, error) {
	log = log.With("token", uint64(g.Token))
	return supervision.New(supervision.Spec{
		Name: "service",
		Children: []supervision.ChildSpec{
			{Name: "heartbeat", Func: func(ctx context.Context) error {
				log.Info("leading")
				t := time.NewTicker(30 * time.Second)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return nil
					case <-t.C:
						log.Info("still leading")
					}
				}
			}},
			{Name: "worker", Func: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		},
	}, supervision.Options{})
}
