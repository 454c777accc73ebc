//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// contenderArg, as the first argument, runs the binary as a contender.
const contenderArg = "--contender"

// Reports a contender sends to the orchestrator.
const (
	reportHello    = "hello"
	reportAcquired = "acquired" // the lock's Acquired event
	reportRenewed  = "renewed"  // its watchdog's Renewed event
	reportPoisoned = "poisoned" // its watchdog gave the lock up
	reportJobEnded = "job-ended"
	reportReleased = "released" // Release deleted the key
	reportLost     = "lost"     // Release found nothing of ours: the lock had been lost
)

type report struct {
	Name       string `json:"name"`
	PID        int    `json:"pid,omitempty"`
	Kind       string `json:"kind"`
	Token      uint64 `json:"token,omitempty"`
	At         int64  `json:"at"` // this host's clock, Unix ns
	ValidUntil int64  `json:"valid_until,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

type writeReq struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"`
	Term  string `json:"term"` // the lock's term: the fence refuses one token from two terms
	Job   int    `json:"job"`
	Step  int    `json:"step"`
	Sent  int64  `json:"sent"`
}

type writeResp struct {
	Accepted bool   `json:"accepted"`
	Entry    int    `json:"entry,omitempty"` // the ledger entry written
	Highest  uint64 `json:"highest"`         // the fence's highest token before this write
	At       int64  `json:"at"`              // when the fence decided, in Unix nanoseconds
}

type contenderConfig struct {
	name, hub, bucket string
	urls              []string
	ttl, step         time.Duration
	steps, replicas   int
}

func contenderMain(args []string) int {
	var cfg contenderConfig
	var urls string
	fs := flag.NewFlagSet("lock "+contenderArg, flag.ContinueOnError)
	fs.StringVar(&cfg.name, "name", "c1", "")
	fs.StringVar(&cfg.hub, "hub", "", "")
	fs.StringVar(&cfg.bucket, "bucket", defaultBucket, "")
	fs.StringVar(&urls, "nats-url", "", "")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "")
	fs.DurationVar(&cfg.step, "step", defaultStep, "")
	fs.IntVar(&cfg.steps, "steps", defaultSteps, "")
	fs.IntVar(&cfg.replicas, "replicas", 1, "")
	color := fs.Bool("color", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.urls = strings.Split(urls, ",")
	log := demo.NewLogger(os.Stderr, !*color)
	ctx, stop := demo.ChildContext()
	defer stop()
	if err := runContender(ctx, cfg, log); err != nil {
		log.Error("contender failed", tint.Err(err))
		return 1
	}
	return 0
}

// runContender takes the lock, runs a job under it, releases it, and again,
// until ctx is done.
func runContender(ctx context.Context, cfg contenderConfig, log *slog.Logger) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	store, err := natsstore.Dial(dctx, natsstore.DialOptions{URLs: cfg.urls, Name: "aster-lock-" + cfg.name},
		natsstore.Config{Bucket: cfg.bucket, Replicas: cfg.replicas, Logger: log})
	cancel()
	if err != nil {
		return err
	}
	defer store.Close()

	hub := &hubClient{base: cfg.hub, name: cfg.name, http: &http.Client{Timeout: 2 * time.Second}}
	rep := newReporter(hub)
	defer rep.close(2 * time.Second)
	locker, err := lock.New(store, lock.Config{
		OwnerID:       cfg.name,
		TTL:           cfg.ttl,
		RetryInterval: cfg.ttl, // the watch wakes a waiting Acquire; polling is the fallback
		Logger:        log,
		OnEvent:       rep.event,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = locker.Close(cctx)
	}()
	rep.send(report{Kind: reportHello, PID: os.Getpid()})
	log.Info("contending for the lock", "resource", resource, "pid", os.Getpid())

	for job := 1; ; job++ {
		g, err := locker.Acquire(ctx, resource)
		if err != nil {
			if ctx.Err() != nil {
				return storeStopped(nil, store)
			}
			return err
		}
		// The job reads the token once and uses it for all its writes, as
		// many critical sections do. If this process is frozen mid-job past
		// the lock's TTL, its next write still carries this token: the
		// fence, not the lock, stops it.
		token, err := g.Token()
		if err == nil {
			log.Info("lock acquired; running a job", "token", token, "job", job)
			work(ctx, hub, log, g.Tenure(), job, cfg)
		}
		rep.send(report{Kind: reportJobEnded, Token: uint64(token)})
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = g.Release(rctx)
		cancel()
		switch {
		case err == nil:
			log.Info("lock released", "token", token)
			rep.send(report{Kind: reportReleased, Token: uint64(token)})
		case errors.Is(err, lease.ErrLost):
			log.Warn("the lock had been lost; nothing to release", "token", token, tint.Err(err))
			rep.send(report{Kind: reportLost, Token: uint64(token), Detail: err.Error()})
		default:
			log.Warn("release failed; the lock expires by its TTL", "token", token, tint.Err(err))
		}
		if sleep(ctx, 2*cfg.step) != nil { // give the others a turn
			return storeStopped(nil, store)
		}
	}
}

// work appends cfg.steps entries to the ledger, one every cfg.step, with
// token, and stops at the first rejection.
func work(ctx context.Context, hub *hubClient, log *slog.Logger, tenure lease.Tenure, job int, cfg contenderConfig) {
	token := tenure.Token
	for step := 1; step <= cfg.steps; step++ {
		sent := time.Now()
		resp, err := hub.write(ctx, writeReq{Token: uint64(token), Term: tenure.Term, Job: job, Step: step, Sent: sent.UnixNano()})
		switch {
		case err != nil:
			log.Warn("write failed", tint.Err(err))
			return
		case !resp.Accepted:
			log.Warn("the fence rejected my write: a newer holder has written; abandoning the job",
				"token", token, "highest", resp.Highest, "step", step)
			return
		}
		msg, attrs := written(resp, sent, time.Now(), cfg.ttl)
		log.Info(msg, append(attrs, "token", token, "step", fmt.Sprintf("%d/%d", step, cfg.steps))...)
		if step < cfg.steps && sleep(ctx, cfg.step) != nil {
			return
		}
	}
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

// written describes an accepted write sent at sent whose answer arrived at
// now. An answer that took more than half the TTL comes from a process that
// was frozen (or a network that stalled) after the fence accepted the
// write: said plainly, with the time the fence accepted it, so that a line
// logged after a newer holder's acquisition does not read as a stale write
// accepted. The fence accepted it because no newer token had written yet.
func written(resp writeResp, sent, now time.Time, ttl time.Duration) (string, []any) {
	attrs := []any{"entry", resp.Entry}
	if wait := now.Sub(sent); wait > ttl/2 {
		return "ledger entry written before any newer holder's write; its answer arrives late (was this process frozen?)",
			append(attrs, "accepted_at", time.Unix(0, resp.At).Format("15:04:05.000"), "answer_after", wait.Round(time.Millisecond))
	}
	return "ledger entry written", attrs
}

// reporter sends reports to the orchestrator in order, from a goroutine of
// its own: event hooks must not block.
type reporter struct {
	hub *hubClient
	q   *demo.Queue[report]
}

func newReporter(hub *hubClient) *reporter {
	return &reporter{hub: hub, q: demo.NewQueue(1024, func(rep report) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = hub.post(ctx, "/report", rep, nil)
		cancel()
	})}
}

// send queues rep, stamped now, unless the queue is full or closed.
func (r *reporter) send(rep report) {
	rep.Name = r.hub.name
	if rep.At == 0 {
		rep.At = time.Now().UnixNano()
	}
	r.q.Send(rep)
}

// close sends what is queued, waiting at most timeout.
func (r *reporter) close(timeout time.Duration) { r.q.Close(timeout) }

// event is the Locker's event hook.
func (r *reporter) event(ev lock.Event) {
	switch e := ev.(type) {
	case lock.LockAcquired:
		r.send(report{Kind: reportAcquired, Token: uint64(e.Token), ValidUntil: e.ValidUntil.UnixNano()})
	case lock.LockRenewed:
		r.send(report{Kind: reportRenewed, Token: uint64(e.Token), ValidUntil: e.ValidUntil.UnixNano()})
	case lock.LockPoisoned:
		r.send(report{Kind: reportPoisoned, Token: uint64(e.Token), Detail: e.Reason.String()})
	}
}

type hubClient struct {
	base, name string
	http       *http.Client
}

func (h *hubClient) write(ctx context.Context, w writeReq) (writeResp, error) {
	w.Name = h.name
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
	resp, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
