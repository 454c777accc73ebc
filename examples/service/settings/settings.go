// Package settings is the sample service's configuration: what it reads
// from its flags and from the pod's environment (the Kubernetes downward
// API), what it serves over HTTP, and how long it may take to stop. The
// manifests in deploy/kubernetes are checked against it.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/asterforge/aster/lease"
)

// The environment variables the service reads. The first three come from
// the pod (the downward API: metadata.name, metadata.namespace,
// spec.nodeName); the others stand for flags.
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
	EnvNodeName     = "NODE_NAME"

	EnvNATSURL   = "NATS_URL"   // -nats-url
	EnvNATSCreds = "NATS_CREDS" // -creds
	EnvBucket    = "ASTER_BUCKET"
	EnvReplicas  = "ASTER_REPLICAS"
	EnvLease     = "ASTER_LEASE"
	EnvTTL       = "ASTER_TTL"
	EnvHTTPAddr  = "HTTP_ADDR"
	EnvDuration  = "ASTER_DURATION"
)

// The lease metadata keys the service publishes while it leads (read back
// by `aster leases`, `aster status` and lease.Leader).
const (
	MetaPod       = "pod"
	MetaNamespace = "namespace"
	MetaNode      = "node"
	MetaHost      = "host" // outside a pod: the host name
)

// What the service serves over HTTP: package monitor's handler under
// PathPrefix.
const (
	// DefaultHTTPPort is the port of DefaultHTTPAddr, the container port
	// the probes use.
	DefaultHTTPPort = 8080
	// PathPrefix is where the monitor's handler is mounted.
	PathPrefix = "/aster"
	// LivePath answers the liveness probe (monitor.Registry.Handler's
	// /livez).
	LivePath = PathPrefix + "/livez"
	// ReadyPath answers the readiness probe (its /readyz).
	ReadyPath = PathPrefix + "/readyz"
	// StatusPath serves the monitor.Report as JSON.
	StatusPath = PathPrefix + "/status"
	// MetricsPath serves the lease, tree and store metrics to Prometheus.
	MetricsPath = "/metrics"
)

// DefaultHTTPAddr is where the service listens for probes and status.
var DefaultHTTPAddr = ":" + strconv.Itoa(DefaultHTTPPort)

// DefaultLease is the lease the service's singleton runs under.
const DefaultLease = "example.service"

// DefaultBucket is the lease bucket (natsstore.DefaultBucket).
const DefaultBucket = "aster_leases"

// Shutdown budgets of the service's own parts, besides the lease
// supervisor's (see GracePeriod).
const (
	// StoreCloseTimeout bounds closing the lease store
	// (natsstore.DefaultCloseTimeout, which the service keeps).
	StoreCloseTimeout = 5 * time.Second
	// HTTPShutdownTimeout bounds the HTTP server's shutdown.
	HTTPShutdownTimeout = time.Second
	// Slack is added to the sum for the process's own exit and the
	// signal's delivery.
	Slack = 2 * time.Second
)

// Settings is what one instance of the service runs with.
type Settings struct {
	// NATSURLs are the NATS servers; empty means an embedded server the
	// service starts itself (for trying it on one machine).
	NATSURLs []string
	// CredsFile is a NATS .creds file ("" for none).
	CredsFile string
	// Bucket is the lease bucket; Replicas its replicas when created.
	Bucket   string
	Replicas int
	// Lease is the lease's ID and timing (OwnerID included).
	Lease lease.Config
	// Instance names the process for operators (monitor.Config.Instance).
	Instance string
	// Meta is published with the lease while this instance leads.
	Meta map[string]string
	// HTTPAddr is where the probes and /aster/status are served.
	HTTPAddr string
	// Duration, when positive, ends the service by itself after that long.
	Duration time.Duration
}

// Parse reads the settings from args (flags) and getenv (the environment;
// flags win), and from hostname when the pod's name is not given. Owner
// identity: POD_NAME, else a fresh lease.NewOwnerID; instance name:
// POD_NAME, else the host name.
func Parse(args []string, getenv func(string) string, hostname func() (string, error), out io.Writer) (Settings, error) {
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		urls, creds, bucket, leaseID, httpAddr string
		replicas                               int
		ttl, duration                          time.Duration
	)
	envDuration := func(name string) (time.Duration, error) {
		v := getenv(name)
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: %w", name, v, err)
		}
		return d, nil
	}
	envTTL, err := envDuration(EnvTTL)
	if err != nil {
		return Settings{}, err
	}
	envRun, err := envDuration(EnvDuration)
	if err != nil {
		return Settings{}, err
	}
	envReplicas := 1
	if v := getenv(EnvReplicas); v != "" {
		if envReplicas, err = strconv.Atoi(v); err != nil {
			return Settings{}, fmt.Errorf("%s=%q: not a number", EnvReplicas, v)
		}
	}
	fs.StringVar(&urls, "nats-url", getenv(EnvNATSURL), "NATS server `URLs`, comma-separated ("+EnvNATSURL+
		"); empty starts an embedded server on 127.0.0.1")
	fs.StringVar(&creds, "creds", getenv(EnvNATSCreds), "NATS credentials `file` ("+EnvNATSCreds+")")
	fs.StringVar(&bucket, "bucket", or(getenv(EnvBucket), DefaultBucket), "lease `bucket` ("+EnvBucket+")")
	fs.IntVar(&replicas, "replicas", envReplicas, "`replicas` of the bucket when it is created ("+EnvReplicas+")")
	fs.StringVar(&leaseID, "lease", or(getenv(EnvLease), DefaultLease), "lease `ID` ("+EnvLease+")")
	fs.DurationVar(&ttl, "ttl", envTTL, "lease TTL; 0 means lease.DefaultTTL ("+EnvTTL+")")
	fs.StringVar(&httpAddr, "http", or(getenv(EnvHTTPAddr), DefaultHTTPAddr), "`address` of the probes and status ("+EnvHTTPAddr+")")
	fs.DurationVar(&duration, "duration", envRun, "stop by itself after this long; 0 runs until SIGTERM ("+EnvDuration+")")
	if err := fs.Parse(args); err != nil {
		return Settings{}, err
	}
	if fs.NArg() > 0 {
		return Settings{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if replicas < 1 || replicas > 5 {
		return Settings{}, fmt.Errorf("-replicas must be between 1 and 5, got %d", replicas)
	}
	if replicas > 1 && strings.TrimSpace(urls) == "" {
		return Settings{}, errors.New("-replicas above 1 needs -nats-url pointing at a JetStream cluster (the embedded server is one node)")
	}
	s := Settings{
		NATSURLs: splitURLs(urls), CredsFile: creds, Bucket: bucket, Replicas: replicas,
		HTTPAddr: httpAddr, Duration: duration, Meta: map[string]string{},
	}
	pod := getenv(EnvPodName)
	host, _ := hostname()
	switch {
	case pod != "":
		s.Instance = pod
		s.Meta[MetaPod] = pod
	default:
		s.Instance = or(host, "unknown")
		if host != "" {
			s.Meta[MetaHost] = host
		}
	}
	if ns := getenv(EnvPodNamespace); ns != "" {
		s.Meta[MetaNamespace] = ns
	}
	if node := getenv(EnvNodeName); node != "" {
		s.Meta[MetaNode] = node
	}
	owner := pod
	if owner == "" {
		owner = lease.NewOwnerID()
	}
	s.Lease = lease.Config{LeaseID: leaseID, OwnerID: owner, TTL: ttl}
	if err := s.Lease.Validate(); err != nil {
		return Settings{}, err
	}
	if err := lease.ValidateMeta(s.Meta); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// ParseOS is Parse with the process's environment and host name.
func ParseOS(args []string, out io.Writer) (Settings, error) {
	return Parse(args, os.Getenv, os.Hostname, out)
}

// OpTimeout is how long one acquire or release of the lease may take: the
// lease's renew period, min(RenewInterval, TTL/2) (as the lease supervisor
// bounds them, internal/leasehold.OpTimeout).
func OpTimeout(c lease.Config) time.Duration {
	return lease.RenewPeriod(c.EffectiveRenewInterval(), c.EffectiveTTL())
}

// ResignTimeout bounds the Resign the service calls on SIGTERM: an
// acquisition in flight when it arrives (one OpTimeout), the workload's
// stop (StopTimeout), and the release (one OpTimeout).
func ResignTimeout(c lease.Config) time.Duration {
	return 2*OpTimeout(c) + c.EffectiveStopTimeout()
}

// SupervisorShutdown is how long the lease supervisor's Run may take to
// return once its context ends (actors: LeaseSupervisor.Run's shutdown
// budget): an acquisition in flight, the workload's stop, the watchdog's
// stop and the release, with a second of slack.
func SupervisorShutdown(c lease.Config) time.Duration {
	return 2*OpTimeout(c) + 2*c.EffectiveStopTimeout() + time.Second
}

// GracePeriod is the shortest terminationGracePeriodSeconds that lets an
// instance with lease c stop cleanly after SIGTERM, in the order the
// service does it: Resign (ResignTimeout), then Run's shutdown
// (SupervisorShutdown; quick after a Resign that succeeded, but a Resign
// that timed out leaves it all to do), then closing the store, then the
// HTTP server, plus Slack. With the defaults (TTL 30 s, so renew period
// 10 s and stop timeout 3 s): 23 s + 27 s + 5 s + 1 s + 2 s = 58 s.
func GracePeriod(c lease.Config) time.Duration {
	return ResignTimeout(c) + SupervisorShutdown(c) + StoreCloseTimeout + HTTPShutdownTimeout + Slack
}

// HoldOff is how long a resigned instance stands by without competing: as
// long as it may take to stop, so that it never takes the lease back
// while it shuts down.
func HoldOff(c lease.Config) time.Duration { return GracePeriod(c) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// splitURLs splits a comma-separated list, dropping blanks.
func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
