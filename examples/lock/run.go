//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

type options struct {
	contenders int
	ttl        time.Duration
	urls       []string // empty: an embedded server
	bucket     string
	replicas   int           // of the bucket, when created
	steps      int           // writes per job
	step       time.Duration // between two writes of a job
	out        io.Writer
	color      bool
	exe        string // "" means this binary
}

// hold is one acquisition of the lock, named by its token.
type hold struct {
	token      uint64
	name       string
	acquired   time.Time
	validUntil time.Time // the latest the holder reported
	firstWrite time.Time // send time of its first accepted write
	accepted   int
	rejected   int
	jobEnded   time.Time
	end        string // released, lost, ...
}

type writeRec struct {
	req      writeReq
	at       time.Time
	accepted bool
	highest  uint64
}

type action struct {
	at   time.Time
	kind string // SIGSTOP, SIGCONT, SIGTERM
	name string
}

// recorder keeps what the example observes; safe for concurrent use.
type recorder struct {
	demo.Board
	fence   lease.Fence
	ledger  int
	hello   map[string]int // name -> pid
	holds   map[uint64]*hold
	writes  []writeRec
	actions []action
}

func (r *recorder) holdFor(token uint64, name string) *hold {
	h := r.holds[token]
	if h == nil {
		h = &hold{token: token, name: name}
		r.holds[token] = h
	}
	return h
}

func (r *recorder) write(w writeReq) writeResp {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	defer r.Touch()
	rec := writeRec{req: w, highest: uint64(r.fence.Stats().Highest.Token)}
	resp := writeResp{Highest: rec.highest}
	err := r.fence.Do(lease.Tenure{Token: lease.Token(w.Token), Term: w.Term}, func() error {
		r.ledger++
		resp.Entry = r.ledger
		return nil
	})
	rec.at, rec.accepted, resp.Accepted = time.Now(), err == nil, err == nil
	resp.At = rec.at.UnixNano()
	r.writes = append(r.writes, rec)
	h := r.holdFor(w.Token, w.Name)
	if rec.accepted {
		if h.accepted == 0 {
			h.firstWrite = time.Unix(0, w.Sent)
		}
		h.accepted++
	} else {
		h.rejected++
	}
	return resp
}

func (r *recorder) report(rep report) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	defer r.Touch()
	at := time.Unix(0, rep.At)
	if rep.Kind == reportHello {
		r.hello[rep.Name] = rep.PID
		return
	}
	if rep.Token == 0 {
		return
	}
	h := r.holdFor(rep.Token, rep.Name)
	switch rep.Kind {
	case reportAcquired:
		h.acquired = at
		fallthrough
	case reportRenewed:
		if v := time.Unix(0, rep.ValidUntil); v.After(h.validUntil) {
			h.validUntil = v
		}
	case reportJobEnded:
		h.jobEnded = at
	case reportReleased, reportLost:
		h.end = rep.Kind
	case reportPoisoned:
		if h.end == "" {
			h.end = "poisoned (" + rep.Detail + ")"
		}
	}
}

// current returns the hold with the highest token that has written, if its
// job has not ended. r.mu must be held.
func (r *recorder) current() *hold {
	var cur *hold
	for _, h := range r.holds {
		if h.accepted > 0 && (cur == nil || h.token > cur.token) {
			cur = h
		}
	}
	if cur == nil || !cur.jobEnded.IsZero() {
		return nil
	}
	return cur
}

// run runs the example and returns its summary; every contender process
// has exited when it returns.
func run(ctx context.Context, o options) (*summary, error) {
	log := demo.NewLogger(o.out, !o.color)
	rec := &recorder{hello: map[string]int{}, holds: map[uint64]*hold{}}
	exe, err := demo.Executable(o.exe)
	if err != nil {
		return nil, err
	}
	if o.bucket == "" {
		o.bucket = defaultBucket
	}
	urls, stopServer, err := demo.Servers(ctx, o.urls, "aster-lock-example", log)
	if err != nil {
		return nil, err
	}
	defer stopServer()
	// The bucket is created once, before any contender starts, as an
	// administrator would (natsstore.CreateBucket), and not by the first
	// contender's store, which would warn that a missing bucket in
	// production is a mistake.
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = createBucket(bctx, urls, natsstore.Config{Bucket: o.bucket, Replicas: o.replicas}, log)
	cancel()
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, req *http.Request) {
		var wr writeReq
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<16)).Decode(&wr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := rec.write(wr)
		status := http.StatusOK
		if !resp.Accepted {
			status = http.StatusConflict
			log.Warn("fence: stale write rejected", "from", wr.Name, "token", wr.Token, "highest", resp.Highest)
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(resp)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, req *http.Request) {
		var rep report
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<16)).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec.report(rep)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		<-served
	}()

	var mu sync.Mutex
	kids := map[string]*demo.Child{}
	defer func() { // every path: stop the contenders, bounded
		mu.Lock()
		defer mu.Unlock()
		var wg sync.WaitGroup
		for _, c := range kids {
			wg.Go(func() { c.Stop(2*o.ttl + 3*time.Second) })
		}
		wg.Wait()
	}()
	colors := []int{36, 35, 33, 34, 32, 96, 95, 93, 94}
	for i := range o.contenders {
		name := "c" + strconv.Itoa(i+1)
		prefix := name + " │ "
		if o.color {
			prefix = fmt.Sprintf("\x1b[1;%dm%s\x1b[0m │ ", colors[i%len(colors)], name)
		}
		c, err := demo.StartChild(name, exe, []string{contenderArg,
			"-name", name, "-hub", "http://" + ln.Addr().String(), "-bucket", o.bucket,
			"-nats-url", strings.Join(urls, ","), "-ttl", o.ttl.String(), "-replicas", strconv.Itoa(max(o.replicas, 1)),
			"-steps", strconv.Itoa(o.steps), "-step", o.step.String(), "-color=" + strconv.FormatBool(o.color),
		}, nil, demo.NewPrefixWriter(demo.NewConsole(o.out, false, nil), prefix))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		kids[name] = c
		mu.Unlock()
	}

	err = script(ctx, o, rec, log, func(kind, name string) error {
		mu.Lock()
		c := kids[name]
		mu.Unlock()
		rec.Mu.Lock()
		rec.actions = append(rec.actions, action{at: time.Now(), kind: kind, name: name})
		rec.Mu.Unlock()
		sig := map[string]syscall.Signal{"SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT}[kind]
		return c.Signal(sig)
	})
	if err != nil {
		log.Error("the example did not finish", tint.Err(err))
	}
	log.Info("▶ done: stopping the contenders, the holder last")
	rec.Mu.Lock()
	holder := ""
	if h := rec.current(); h != nil {
		holder = h.name
	}
	rec.Mu.Unlock()
	mu.Lock()
	for _, last := range []bool{false, true} {
		var wg sync.WaitGroup
		for name, c := range kids {
			if (name == holder) == last {
				wg.Go(func() { c.Stop(2*o.ttl + 3*time.Second) })
			}
		}
		wg.Wait()
	}
	mu.Unlock()
	return summarize(rec), err
}

// script lets the contenders take turns, then freezes a holder mid-job.
func script(ctx context.Context, o options, rec *recorder, log *slog.Logger, signal func(kind, name string) error) error {
	if err := rec.WaitFor(ctx, 20*time.Second, "every contender to connect", func() bool {
		return len(rec.hello) == o.contenders
	}); err != nil {
		return err
	}
	if err := rec.WaitFor(ctx, 10*time.Second+o.ttl, "two holders to have written", func() bool {
		n := 0
		for _, h := range rec.holds {
			if h.accepted > 0 {
				n++
			}
		}
		return n >= 2
	}); err != nil {
		return err
	}
	var frozen *hold
	if err := rec.WaitFor(ctx, 10*time.Second, "a holder in the middle of its job", func() bool {
		if h := rec.current(); h != nil && h.accepted >= 1 && h.accepted < o.steps-1 {
			frozen = h
			return true
		}
		return false
	}); err != nil {
		return err
	}
	name, token := frozen.name, frozen.token
	log.Info("▶ SIGSTOP the holder in the middle of its job, past its TTL", "holder", name, "token", token, "ttl", o.ttl)
	if err := signal("SIGSTOP", name); err != nil {
		return err
	}
	if err := rec.WaitFor(ctx, o.ttl+5*time.Second, "another contender to take the lock over", func() bool {
		for _, h := range rec.holds {
			if h.token > token && h.accepted > 0 {
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}
	log.Info("▶ SIGCONT: the frozen holder resumes its job with its old token", "holder", name, "token", token)
	if err := signal("SIGCONT", name); err != nil {
		return err
	}
	if err := rec.WaitFor(ctx, 5*time.Second, "the frozen holder's late write", func() bool {
		return rec.holds[token].rejected > 0
	}); err != nil {
		return err
	}
	return sleep(ctx, time.Second)
}

type summary struct {
	holds      []hold
	accepted   int
	rejected   []writeRec
	late       int // rejected writes from a holder after its validity
	increasing bool
	overlaps   int
	pairs      int
	problems   []string
}

func summarize(r *recorder) *summary {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	s := &summary{increasing: true}
	for _, h := range r.holds {
		s.holds = append(s.holds, *h)
	}
	slices.SortFunc(s.holds, func(a, b hold) int { return int(a.token) - int(b.token) })
	begin := func(h hold) time.Time {
		if h.acquired.IsZero() || (!h.firstWrite.IsZero() && h.firstWrite.Before(h.acquired)) {
			return h.firstWrite
		}
		return h.acquired
	}
	byTime := slices.Clone(s.holds)
	slices.SortStableFunc(byTime, func(a, b hold) int { return begin(a).Compare(begin(b)) })
	for i := 1; i < len(byTime); i++ {
		if byTime[i].token <= byTime[i-1].token {
			s.increasing = false
		}
	}
	for _, w := range r.writes {
		if w.accepted {
			s.accepted++
			continue
		}
		s.rejected = append(s.rejected, w)
		if h := r.holds[w.req.Token]; h != nil && time.Unix(0, w.req.Sent).After(h.validUntil) {
			s.late++
		}
	}
	// A holder acts from its acquisition until its job ends or its validity
	// does, whichever is first. No two such intervals may intersect.
	for i, a := range s.holds {
		for _, b := range s.holds[i+1:] {
			s.pairs++
			aEnd, bEnd := earliest(a.jobEnded, a.validUntil), earliest(b.jobEnded, b.validUntil)
			if begin(a).Before(bEnd) && begin(b).Before(aEnd) {
				s.overlaps++
			}
		}
	}
	if s.overlaps > 0 {
		s.problems = append(s.problems, fmt.Sprintf("%d overlapping holds", s.overlaps))
	}
	if !s.increasing {
		s.problems = append(s.problems, "tokens not strictly increasing")
	}
	if s.late == 0 {
		s.problems = append(s.problems, "no late write was rejected")
	}
	return s
}

// earliest returns the earlier of the non-zero times, or the far future.
func earliest(ts ...time.Time) time.Time {
	out := demo.EndOfTime
	for _, t := range ts {
		if !t.IsZero() && t.Before(out) {
			out = t
		}
	}
	return out
}

// OK reports whether the fence's verdict is a pass.
func (s *summary) OK() bool { return len(s.problems) == 0 }

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nHolds of the lock %q (token: the store revision of the acquiring write)\n", resource)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  token\tholder\twrites accepted\twrites rejected\tended")
	for _, h := range s.holds {
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%s\n", h.token, h.name, h.accepted, h.rejected, h.end)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nFence (lease.Fence in front of the ledger)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  accepted writes\t%d\n", s.accepted)
	var rej []string
	for _, r := range s.rejected {
		rej = append(rej, fmt.Sprintf("%s token %d < highest %d", r.req.Name, r.req.Token, r.highest))
	}
	fmt.Fprintf(tw, "  rejected writes\t%d (%s), %d of them sent after the holder's validity\n", len(s.rejected), strings.Join(rej, "; "), s.late)
	order := "strictly increasing, in order of acquisition"
	if !s.increasing {
		order = "NOT strictly increasing"
	}
	fmt.Fprintf(tw, "  tokens\t%s\n", order)
	fmt.Fprintf(tw, "  overlaps\t%d (%d pairs of holds compared, on this host's clock)\n", s.overlaps, s.pairs)
	verdict := "PASS: the late write was rejected, never two holders at once"
	if !s.OK() {
		verdict = "FAIL: " + strings.Join(s.problems, "; ")
	}
	fmt.Fprintf(tw, "  verdict\t%s\n", verdict)
	_ = tw.Flush()
}

// createBucket creates cfg's bucket on the servers at urls, or uses the one
// there.
func createBucket(ctx context.Context, urls []string, cfg natsstore.Config, log *slog.Logger) error {
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name("aster-lock-orchestrator"))
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	switch err := natsstore.CreateBucket(ctx, js, cfg); {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		log.Info("using the existing bucket", "bucket", cfg.Bucket)
	case err != nil:
		return fmt.Errorf("creating the bucket %q: %w", cfg.Bucket, err)
	default:
		log.Info("bucket created", "bucket", cfg.Bucket, "replicas", max(cfg.Replicas, 1))
	}
	return nil
}
