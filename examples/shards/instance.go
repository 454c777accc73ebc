//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
)

// instanceArg, as the first argument, runs the binary as an instance.
const instanceArg = "--instance"

// Reports an instance sends to the orchestrator.
const (
	reportHello   = "hello"
	reportStarted = "started" // a shard's workload started
	reportStopped = "stopped" // it returned
)

type report struct {
	Name  string `json:"name"`
	PID   int    `json:"pid,omitempty"`
	Kind  string `json:"kind"`
	Shard string `json:"shard,omitempty"`
	Token uint64 `json:"token,omitempty"`
	At    int64  `json:"at"` // this host's clock, Unix ns
	Cause string `json:"cause,omitempty"`
}

type writeReq struct {
	Name  string `json:"name"`
	Shard string `json:"shard"`
	Token uint64 `json:"token"`
	Term  string `json:"term"`
}

type writeResp struct {
	Accepted bool   `json:"accepted"`
	Highest  uint64 `json:"highest"`
}

type instanceConfig struct {
	name, hub, bucket string
	urls              []string
	ttl               time.Duration
	shards, replicas  int
}

func instanceMain(args []string) int {
	var cfg instanceConfig
	var urls string
	fs := flag.NewFlagSet("shards "+instanceArg, flag.ContinueOnError)
	fs.StringVar(&cfg.name, "name", "i1", "")
	fs.StringVar(&cfg.hub, "hub", "", "")
	fs.StringVar(&cfg.bucket, "bucket", defaultBucket, "")
	fs.StringVar(&urls, "nats-url", "", "")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "")
	fs.IntVar(&cfg.shards, "shards", defaultShards, "")
	fs.IntVar(&cfg.replicas, "replicas", 1, "")
	color := fs.Bool("color", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.urls = strings.Split(urls, ",")
	log := demo.NewLogger(os.Stderr, !*color)
	ctx, stop := demo.ChildContext()
	defer stop()
	if err := runInstance(ctx, cfg, log); err != nil {
		log.Error("instance failed", tint.Err(err))
		return 1
	}
	return 0
}

// runInstance takes part in the fleet until ctx is done, then drains: its
// shards are handed over before it exits.
func runInstance(ctx context.Context, cfg instanceConfig, log *slog.Logger) error {
	nc, err := nats.Connect(strings.Join(cfg.urls, ","), nats.Name("aster-shards-"+cfg.name),
		nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := natsstore.NewConn(octx, nc, natsstore.Config{Bucket: cfg.bucket, Replicas: cfg.replicas, Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	cancel()

	hub := &hubClient{base: cfg.hub, name: cfg.name, http: &http.Client{Timeout: 2 * time.Second}}
	rep := newReporter(hub)
	defer rep.close(2 * time.Second)
	host, err := shard.NewHost(shard.Config{
		Prefix:   fleet,
		Shards:   shard.Range("tenant", cfg.shards),
		Lease:    lease.Config{OwnerID: cfg.name, TTL: cfg.ttl},
		Store:    store, // and the fleet's Directory: one watch of every lease under the prefix
		Workload: func(name string) actors.Workload { return actors.WorkloadFunc(tenant(name, hub, rep, log)) },
		Meta:     map[string]string{"pid": fmt.Sprint(os.Getpid())},
		OnEvent:  func(ev shard.Event) { logEvent(log, ev) },
	})
	if err != nil {
		return err
	}
	rep.send(report{Kind: reportHello, PID: os.Getpid()})
	log.Info("joining the fleet", "shards", cfg.shards, "pid", os.Getpid())

	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- host.Run(runCtx) }()
	select {
	case <-ctx.Done():
	case err := <-done: // Run ended by itself: its store stopped for good, say
		stopRun()
		return storeStopped(err, store)
	}
	log.Info("draining: handing every shard over")
	dctx, dcancel := context.WithTimeout(context.Background(), 4*cfg.ttl)
	if err := host.Drain(dctx); err != nil {
		log.Warn("drain", tint.Err(err))
	}
	dcancel()
	stopRun()
	return storeStopped(<-done, store)
}

// storeStopped returns err, or, when err is nil but the store had stopped
// (its bucket deleted, say), the store's error: a process whose store
// stopped exits non-zero even on SIGTERM, so that whatever runs it sees a
// failure and not a clean stop (as examples/outbox and examples/lock do).
func storeStopped(err error, store interface{ Err() error }) error {
	if err != nil {
		return err
	}
	if serr := store.Err(); serr != nil {
		return fmt.Errorf("the lease store had stopped: %w", serr)
	}
	return nil
}

// tenant is a shard's workload: it writes through the shard's fence every
// 100 ms, with the token checked on the clock, until its context ends.
func tenant(name string, hub *hubClient, rep *reporter, log *slog.Logger) func(context.Context, lease.Token) error {
	return func(ctx context.Context, token lease.Token) error {
		rep.send(report{Kind: reportStarted, Shard: name, Token: uint64(token)})
		defer func() {
			rep.send(report{Kind: reportStopped, Shard: name, Token: uint64(token), Cause: fmt.Sprint(context.Cause(ctx))})
		}()
		term, _ := actors.TermFrom(ctx)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if tn, err := term.Tenure(); err == nil {
				wctx, cancel := context.WithTimeout(ctx, time.Second)
				resp, err := hub.write(wctx, writeReq{Shard: name, Token: uint64(tn.Token), Term: tn.Term})
				cancel()
				if err == nil && !resp.Accepted {
					log.Warn("the fence refused my write", "shard", name, "token", tn.Token, "highest", resp.Highest)
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// logEvent logs what the Host reports, but for the lease supervisors'
// chatter.
func logEvent(log *slog.Logger, ev shard.Event) {
	switch e := ev.(type) {
	case shard.MemberJoined:
		log.Info("member joined", "member", e.Member.OwnerID)
	case shard.MemberLeft:
		log.Info("member left", "member", e.OwnerID)
	case shard.ShardStarted:
		if e.From != "" {
			log.Info("shard taken over", "shard", e.Shard, "token", e.Token, "from", e.From)
		}
	case shard.ShardHandedOver:
		log.Info("shard handed over", "shard", e.Shard, "token", e.Token)
	case shard.Balanced:
		log.Info("balanced", "owned", e.Owned, "members", e.Members, "took", e.Took.Round(time.Millisecond))
	}
}

// reporter sends reports to the orchestrator in order, from a goroutine of
// its own.
type reporter struct {
	hub *hubClient
	q   *demo.Queue[report]
}

func newReporter(hub *hubClient) *reporter {
	return &reporter{hub: hub, q: demo.NewQueue(4096, func(rep report) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = hub.post(ctx, "/report", rep, nil)
		cancel()
	})}
}

func (r *reporter) send(rep report) {
	rep.Name = r.hub.name
	if rep.At == 0 {
		rep.At = time.Now().UnixNano()
	}
	r.q.Send(rep)
}

func (r *reporter) close(timeout time.Duration) { r.q.Close(timeout) }

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
