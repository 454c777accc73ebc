//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lmittmann/tint"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/supervision"
)

// instanceArg, as the first argument, makes the binary run as one service
// instance instead of the orchestrator. It is not in --help: only the
// orchestrator uses it, when it re-executes its own binary.
const instanceArg = "--instance"

// envDial carries the NATS connection settings, secrets included, from the
// orchestrator to its instances, so that they never appear in a process
// list.
const envDial = "ASTER_DEMO_NATS"

// reportKindWorkStopped is sent by the dispatcher when it returns: the end
// of its term's acting interval.
const reportWorkStopped = "work-stopped"

// instanceConfig is what an instance is told by the orchestrator.
type instanceConfig struct {
	name     string
	hub      string // base URL of the orchestrator's HTTP endpoint
	dial     natsstore.DialOptions
	bucket   string
	domain   string
	prefix   string // JetStream API prefix
	leaseID  string
	ttl      time.Duration
	interval time.Duration // between two dispatches
	replicas int
	color    bool // coloured logs
}

// instanceMain runs one service instance until SIGTERM or SIGINT, or until
// its standard input closes (the orchestrator has gone), and returns the
// exit code.
func instanceMain(args []string) int {
	cfg, err := parseInstance(args, os.Getenv(envDial))
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := demo.NewLogger(os.Stderr, !cfg.color)

	ctx, stop := demo.ChildContext()
	defer stop()
	if err := runInstance(ctx, cfg, log); err != nil {
		log.Error("instance failed", tint.Err(err))
		return 1
	}
	return 0
}

// parseInstance reads an instance's configuration from its command line
// and from dial, the value of its environment variable envDial.
func parseInstance(args []string, dial string) (instanceConfig, error) {
	fs := flag.NewFlagSet("outbox "+instanceArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := instanceConfig{}
	fs.StringVar(&cfg.name, "name", "i1", "instance name")
	fs.StringVar(&cfg.hub, "hub", "", "base URL of the orchestrator")
	fs.StringVar(&cfg.bucket, "bucket", defaultBucket, "KV bucket")
	fs.StringVar(&cfg.domain, "js-domain", "", "JetStream domain")
	fs.StringVar(&cfg.prefix, "api-prefix", "", "JetStream API prefix")
	inbox := fs.String("inbox-prefix", "", "inbox prefix of the NATS connection")
	fs.IntVar(&cfg.replicas, "replicas", 1, "replicas of the bucket when it is created")
	fs.StringVar(&cfg.leaseID, "lease", defaultLeaseID, "lease ID")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "lease TTL")
	fs.DurationVar(&cfg.interval, "interval", defaultInterval, "dispatch interval")
	fs.BoolVar(&cfg.color, "color", false, "coloured logs")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if dial != "" {
		var env dialEnv
		if err := json.Unmarshal([]byte(dial), &env); err != nil {
			return cfg, fmt.Errorf("bad %s: %w", envDial, err)
		}
		cfg.dial = env.options()
	}
	cfg.dial.InboxPrefix = *inbox
	return cfg, nil
}

// runInstance runs the LeaseSupervisor of one instance until ctx is done.
func runInstance(ctx context.Context, cfg instanceConfig, log *slog.Logger) error {
	owner := lease.NewOwnerID()
	hub := &hubClient{base: cfg.hub, inst: cfg.name, owner: owner, http: &http.Client{Timeout: 2 * time.Second}}

	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	store, err := natsstore.Dial(dctx, cfg.dial, natsstore.Config{Bucket: cfg.bucket, Domain: cfg.domain, APIPrefix: cfg.prefix,
		Replicas: cfg.replicas, Logger: log})
	cancel()
	if err != nil {
		return err
	}
	defer store.Close()

	d := &dispatcher{hub: hub, log: log, interval: cfg.interval}
	rep := newReporter(hub, d, log)
	defer rep.close(2 * time.Second)
	rep.send(report{Kind: reportHello, PID: os.Getpid()})
	d.rep = rep

	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lease.Config{
			LeaseID: cfg.leaseID,
			OwnerID: owner,
			TTL:     cfg.ttl,
			// The watch wakes a standby at once; polling is the fallback.
			StandbyRetryInterval: cfg.ttl,
		},
		Meta:     map[string]string{"instance": cfg.name, "pid": strconv.Itoa(os.Getpid())}, // who leads, for aster leases and aster watch
		Store:    store,
		Workload: actors.WorkloadTree(d.tree),
		Logger:   log,
		OnEvent:  rep.event,
	})
	if err != nil {
		return err
	}
	log.Info("instance up; competing for the lease", "owner", owner, "pid", os.Getpid(), "lease", cfg.leaseID)
	err = sup.Run(ctx)
	log.Info("instance stopped")
	return storeStopped(err, store)
}

// storeStopped returns err, or, when err is nil but the store had stopped
// (its bucket deleted, say), the store's error: a process whose store
// stopped exits non-zero even on SIGTERM, so that whatever runs it sees a
// failure and not a clean stop.
func storeStopped(err error, store interface{ Err() error }) error {
	if err != nil {
		return err
	}
	if serr := store.Err(); serr != nil {
		return fmt.Errorf("the lease store had stopped: %w", serr)
	}
	return nil
}

// dispatcher is the outbox dispatcher: while its instance leads, it marks
// the outbox's next message dispatched every interval, through the fence.
type dispatcher struct {
	hub      *hubClient
	rep      *reporter
	log      *slog.Logger
	interval time.Duration
	seq      atomic.Uint64
	last     atomic.Pointer[lease.Tenure] // the tenure of the write it prepared last
}

// tree is the workload of one leadership term: a supervision tree whose one
// child is the dispatcher loop, bound to the term's grant.
func (d *dispatcher) tree(g actors.Granted) (*supervision.Tree, error) {
	return supervision.New(supervision.Spec{
		Name: "outbox",
		Children: []supervision.ChildSpec{{
			Name:     "dispatcher",
			Func:     func(ctx context.Context) error { return d.run(ctx, g) },
			Shutdown: time.Second,
		}},
	}, supervision.Options{Logger: d.log})
}

// run dispatches until the term ends. Before each write it reads the token
// from the Term, which fails as soon as the lease is lost or its validity
// has ended: a careful writer never sends with a token it no longer holds.
// The fence is for the writes this check cannot stop (see lateWrite).
func (d *dispatcher) run(ctx context.Context, g actors.Granted) error {
	defer func() { d.rep.send(report{Kind: reportWorkStopped, Token: uint64(g.Token)}) }()
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		token, err := g.Term.Token()
		if err != nil {
			select { // lost or expired: the LeaseSupervisor stops this workload
			case <-ctx.Done():
			case <-g.Context.Done():
			}
			return nil
		}
		tenure := lease.Tenure{Token: token, Term: g.Term.ID()}
		d.last.Store(&tenure)
		w := writeReq{Token: uint64(token), Term: tenure.Term, Seq: d.seq.Add(1), SentAt: time.Now().UnixNano()}
		resp, err := d.hub.write(ctx, w)
		switch {
		case err != nil && ctx.Err() == nil:
			d.log.Warn("write failed", "token", token, tint.Err(err))
		case err != nil:
		case !resp.Accepted:
			d.log.Error("the fence rejected my write", "token", token, "highest", resp.Highest)
		case n == 0:
			d.log.Info("dispatching", "message", resp.Message, "token", token)
		case n%20 == 0:
			d.log.Info("still dispatching", "message", resp.Message, "token", token, "writes", n+1)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-g.Context.Done():
			return nil
		case <-tick.C:
		}
	}
}

// lateWrite sends the write this instance had prepared with token when its
// lease was lost, as it arrives when a process that froze between reading
// its token and sending (a GC pause, SIGSTOP, a slow network) thaws: after
// a newer owner has written. The fence must reject it.
func (d *dispatcher) lateWrite(token uint64) {
	last := d.last.Load()
	if token == 0 || last == nil || uint64(last.Token) != token {
		return
	}
	w := writeReq{Token: token, Term: last.Term, Seq: d.seq.Add(1), SentAt: time.Now().UnixNano(), Late: true}
	d.log.Warn("sending the write prepared before the lease was lost, with the old token", "token", token)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := d.hub.write(ctx, w)
	switch {
	case err != nil:
		d.log.Warn("late write failed", tint.Err(err))
	case resp.Accepted:
		d.log.Error("the fence ACCEPTED a late write", "token", token, "message", resp.Message)
	default:
		d.log.Info("the fence rejected the late write: stale token", "token", token, "highest", resp.Highest)
	}
}

// reporter sends an instance's reports to the orchestrator, in order, from
// a goroutine of its own: lease event hooks must not block.
type reporter struct {
	hub *hubClient
	q   *demo.Queue[report]
}

func newReporter(hub *hubClient, d *dispatcher, log *slog.Logger) *reporter {
	return &reporter{hub: hub, q: demo.NewQueue(1024, func(rep report) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := hub.report(ctx, rep)
		cancel()
		if err != nil {
			log.Debug("report not delivered", "kind", rep.Kind, tint.Err(err))
		}
		if rep.Kind == reportPoisoned {
			d.lateWrite(rep.Token)
		}
	})}
}

// send queues rep, stamped now, unless the queue is full or closed.
func (r *reporter) send(rep report) {
	if rep.At == 0 {
		rep.At = time.Now().UnixNano()
	}
	r.q.Send(rep)
}

// close sends what is queued, waiting at most timeout.
func (r *reporter) close(timeout time.Duration) {
	r.send(report{Kind: reportBye})
	r.q.Close(timeout)
}

// event is the LeaseSupervisor's event hook.
func (r *reporter) event(ev actors.Event) {
	now := time.Now().UnixNano()
	switch e := ev.(type) {
	case actors.Acquired:
		detail := ""
		if e.Handover {
			detail = "handover"
		}
		r.send(report{Kind: reportAcquired, Token: uint64(e.Token), At: now, ValidUntil: e.ValidUntil.UnixNano(), Detail: detail})
	case actors.Renewed:
		r.send(report{Kind: reportRenewed, Token: uint64(e.Token), At: now, ValidUntil: e.ValidUntil.UnixNano()})
	case actors.RenewalFailed:
		r.send(report{Kind: reportRenewFailed, Token: uint64(e.Token), At: now, Detail: errString(e.Err)})
	case actors.Poisoned:
		r.send(report{Kind: reportPoisoned, Token: uint64(e.Token), At: now, Detail: e.Reason.String()})
	case actors.Released:
		r.send(report{Kind: reportReleased, Token: uint64(e.Token), At: now})
	case actors.NotReleased:
		r.send(report{Kind: reportNotReleased, Token: uint64(e.Token), At: now, Detail: errString(e.Err)})
	case actors.WorkloadStopTimeout:
		r.send(report{Kind: reportStopTimeout, Token: uint64(e.Token), At: now})
	case actors.WorkloadExited:
		r.send(report{Kind: reportExited, Token: uint64(e.Token), At: now, Detail: errString(e.Err)})
	case actors.Standby:
		r.send(report{Kind: reportStandby, At: now, Detail: e.Holder.OwnerID})
	case actors.Restarting:
		r.send(report{Kind: reportRestarting, At: now, Detail: e.Delay.String()})
	case actors.GaveUp:
		r.send(report{Kind: reportEscalated, At: now, Detail: errString(e.Err)})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// hubClient posts to the orchestrator.
type hubClient struct {
	base, inst, owner string
	http              *http.Client
}

func (h *hubClient) report(ctx context.Context, r report) error {
	r.Inst, r.Owner = h.inst, h.owner
	return h.post(ctx, "/report", r, nil)
}

func (h *hubClient) write(ctx context.Context, w writeReq) (writeResp, error) {
	w.Inst, w.Owner = h.inst, h.owner
	var resp writeResp
	err := h.post(ctx, "/write", w, &resp)
	return resp, err
}

func (h *hubClient) post(ctx context.Context, path string, body, into any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if into == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return errors.Join(fmt.Errorf("%s: bad answer", path), err)
	}
	return nil
}
