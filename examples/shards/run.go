//go:build unix

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
	"github.com/asterforge/aster/shard"
)

type options struct {
	instances int
	shards    int
	ttl       time.Duration
	urls      []string // empty: an embedded server
	bucket    string
	replicas  int // of the bucket, when created; 0 means 1
	out       io.Writer
	color     bool
	exe       string // "" means this binary
}

// span is one run of a shard's workload on one instance, from its reports.
type span struct {
	name  string
	token uint64
	start time.Time
	end   time.Time // zero while it runs
}

// recorder keeps what the workloads report; safe for concurrent use.
type recorder struct {
	demo.Board
	hello    map[string]int // name -> pid
	runs     map[string][]*span
	killed   map[string]time.Time
	fences   map[string]*lease.Fence
	accepted int
	rejected int
}

func newRecorder() *recorder {
	return &recorder{hello: map[string]int{}, runs: map[string][]*span{}, killed: map[string]time.Time{},
		fences: map[string]*lease.Fence{}}
}

func (r *recorder) report(rep report) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	defer r.Touch()
	at := time.Unix(0, rep.At)
	switch rep.Kind {
	case reportHello:
		r.hello[rep.Name] = rep.PID
	case reportStarted:
		r.runs[rep.Shard] = append(r.runs[rep.Shard], &span{name: rep.Name, token: rep.Token, start: at})
	case reportStopped:
		for _, ru := range r.runs[rep.Shard] {
			if ru.name == rep.Name && ru.token == rep.Token && ru.end.IsZero() {
				ru.end = at
			}
		}
	}
}

func (r *recorder) write(w writeReq) writeResp {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	f := r.fences[w.Shard]
	if f == nil {
		f = &lease.Fence{}
		r.fences[w.Shard] = f
	}
	resp := writeResp{Highest: uint64(f.Stats().Highest.Token)}
	if f.Admit(lease.Tenure{Token: lease.Token(w.Token), Term: w.Term}) == nil {
		r.accepted++
		resp.Accepted = true
	} else {
		r.rejected++
	}
	return resp
}

// kill records that name was killed: its runs ended then.
func (r *recorder) kill(name string, at time.Time) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.killed[name] = at
	for _, runs := range r.runs {
		for _, ru := range runs {
			if ru.name == name && ru.end.IsZero() {
				ru.end = at
			}
		}
	}
}

// table returns which live instance runs each shard, and whether every
// shard runs on exactly one. r.Mu must be held.
func (r *recorder) table(shards []string) (map[string]string, bool) {
	out := map[string]string{}
	ok := true
	for _, s := range shards {
		n := 0
		for _, ru := range r.runs[s] {
			if ru.end.IsZero() {
				out[s] = ru.name
				n++
			}
		}
		ok = ok && n == 1
	}
	return out, ok
}

// balanced reports whether every shard runs on one of live, each of which
// runs S/N or S/N+1 of them. r.Mu must be held.
func (r *recorder) balanced(shards, live []string) bool {
	t, ok := r.table(shards)
	if !ok {
		return false
	}
	counts := map[string]int{}
	for _, n := range t {
		if !slices.Contains(live, n) {
			return false
		}
		counts[n]++
	}
	floor := len(shards) / len(live)
	for _, n := range live {
		if c := counts[n]; c != floor && c != floor+1 {
			return false
		}
	}
	return true
}

// starts counts the workload starts so far. r.Mu must be held.
func (r *recorder) starts() int {
	n := 0
	for _, runs := range r.runs {
		n += len(runs)
	}
	return n
}

// step is one change of the fleet and its outcome.
type step struct {
	what     string
	live     []string
	table    map[string]string
	took     time.Duration
	moved    int // workload starts during the step
	least    int // the moves the new shares require
	balanced bool
	// free is the longest a shard ran nowhere during the step, from the
	// change on (freeShard names it); maxFree, when not 0, is how long
	// the verdict allows.
	free      time.Duration
	freeShard string
	maxFree   time.Duration
}

// maxFreeAfterJoin is how long a shard may run nowhere after an instance
// joins: the others hand it its share, released and taken at once, even
// when a crashed member's key is still in the store.
const maxFreeAfterJoin = time.Second

// longestFree returns the shard that ran nowhere for the longest time
// within [from, to], and for how long. r.Mu must be held.
func (r *recorder) longestFree(shards []string, from, to time.Time) (string, time.Duration) {
	worst, longest := "", time.Duration(0)
	gap := func(s string, a, b time.Time) {
		if d := b.Sub(a); d > longest {
			worst, longest = s, d
		}
	}
	for _, s := range shards {
		runs := slices.Clone(r.runs[s])
		slices.SortFunc(runs, func(a, b *span) int { return a.start.Compare(b.start) })
		at := from // every instant before at is covered, or judged
		for _, ru := range runs {
			if !endOf(ru).After(at) {
				continue
			}
			if ru.start.After(at) {
				gap(s, at, minTime(ru.start, to))
			}
			if at = endOf(ru); !at.Before(to) {
				break
			}
		}
		if at.Before(to) {
			gap(s, at, to)
		}
	}
	return worst, longest
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// run runs the example and returns its summary; every instance process has
// exited when it returns.
func run(ctx context.Context, o options) (*summary, error) {
	log := demo.NewLogger(o.out, !o.color)
	rec := newRecorder()
	shards := shard.Range("tenant", o.shards)
	exe := o.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if o.bucket == "" {
		o.bucket = defaultBucket
	}
	urls := o.urls
	if len(urls) == 0 {
		ns, err := embedded.Start(ctx, embedded.Config{ServerName: "aster-shards-example"})
		if err != nil {
			return nil, fmt.Errorf("starting the embedded NATS server: %w", err)
		}
		defer ns.Close()
		urls = []string{ns.ClientURL()}
		log.Info("embedded NATS server started", "url", ns.ClientURL())
	}
	// The orchestrator creates the bucket, with o.replicas replicas, before
	// any instance starts, as an administrator would (natsstore.CreateBucket,
	// not a store that creates a missing bucket and warns that in production
	// this means a mistake): instances that race to create a replicated
	// bucket can find it not yet readable.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := createBucket(dctx, urls, natsstore.Config{Bucket: o.bucket, Replicas: o.replicas}, log)
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
		if !resp.Accepted {
			log.Warn("fence: stale write rejected", "shard", wr.Shard, "from", wr.Name, "token", wr.Token, "highest", resp.Highest)
			w.WriteHeader(http.StatusConflict)
		}
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
	grace := 4*o.ttl + 3*time.Second
	defer func() { // every path: stop the instances, bounded
		mu.Lock()
		defer mu.Unlock()
		var wg sync.WaitGroup
		for _, c := range kids {
			wg.Go(func() { c.Stop(grace) })
		}
		wg.Wait()
	}()
	colors := []int{36, 35, 33, 34, 32, 96, 95, 93, 94}
	next := 0
	start := func() (string, error) {
		next++
		name := "i" + strconv.Itoa(next)
		prefix := name + " │ "
		if o.color {
			prefix = fmt.Sprintf("\x1b[1;%dm%s\x1b[0m │ ", colors[(next-1)%len(colors)], name)
		}
		c, err := demo.StartChild(name, exe, []string{instanceArg,
			"-name", name, "-hub", "http://" + ln.Addr().String(), "-bucket", o.bucket,
			"-nats-url", strings.Join(urls, ","), "-ttl", o.ttl.String(), "-shards", strconv.Itoa(o.shards),
			"-replicas", strconv.Itoa(max(o.replicas, 1)),
			"-color=" + strconv.FormatBool(o.color),
		}, nil, demo.NewPrefixWriter(demo.NewConsole(o.out, false, nil), prefix))
		if err != nil {
			return "", err
		}
		mu.Lock()
		kids[name] = c
		mu.Unlock()
		return name, nil
	}
	child := func(name string) *demo.Child {
		mu.Lock()
		defer mu.Unlock()
		return kids[name]
	}

	sum := &summary{shards: shards}
	err = script(ctx, o, rec, log, shards, sum, start, child)
	if err != nil {
		log.Error("the example did not finish", tint.Err(err))
	}
	log.Info("▶ done: stopping the instances (each drains first)")
	mu.Lock()
	var wg sync.WaitGroup
	for _, c := range kids {
		wg.Go(func() { c.Stop(grace) })
	}
	wg.Wait()
	mu.Unlock()
	summarize(rec, sum)
	return sum, err
}

// script starts the fleet, kills an instance, adds one, and stops one
// gracefully, recording the assignment after each step.
func script(ctx context.Context, o options, rec *recorder, log *slog.Logger, shards []string, sum *summary,
	start func() (string, error), child func(string) *demo.Child) error {
	var live []string
	first := true
	// change makes a change of the fleet, then waits until it is balanced;
	// maxFree, when not 0, is how long the verdict lets a shard run
	// nowhere from the change on.
	change := func(what string, limit, maxFree time.Duration, do func() error) error {
		log.Info("▶ " + what)
		// Where the shards run now, not where they ran when the last step
		// was judged balanced: a member may have taken its share since.
		rec.Mu.Lock()
		starts := rec.starts()
		before, _ := rec.table(shards)
		rec.Mu.Unlock()
		began := time.Now()
		if err := do(); err != nil {
			return err
		}
		st := step{what: what, live: slices.Clone(live), maxFree: maxFree}
		err := rec.WaitFor(ctx, limit, "the fleet to balance after "+what, func() bool {
			return rec.balanced(shards, live)
		})
		st.took = time.Since(began)
		rec.Mu.Lock()
		st.freeShard, st.free = rec.longestFree(shards, began, began.Add(st.took))
		st.table, st.balanced = rec.table(shards)
		st.balanced = st.balanced && err == nil
		st.moved = rec.starts() - starts
		rec.Mu.Unlock()
		st.least = -1 // the fleet forms: instances start one after another
		if !first {
			st.least = shard.MinMoves(shards, live, before)
			for _, n := range before {
				if !slices.Contains(live, n) {
					st.least++
				}
			}
		}
		first = false
		sum.steps = append(sum.steps, st)
		st.print(o.out, shards)
		return err
	}

	if err := change(fmt.Sprintf("start %d instances", o.instances), 30*time.Second, 0, func() error {
		for range o.instances {
			name, err := start()
			if err != nil {
				return err
			}
			live = append(live, name)
		}
		return rec.WaitFor(ctx, 20*time.Second, "every instance to connect", func() bool {
			return len(rec.hello) == len(live)
		})
	}); err != nil {
		return err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}

	rec.Mu.Lock()
	now, _ := rec.table(shards)
	rec.Mu.Unlock()
	victim := busiest(now, live)
	if err := change("SIGKILL "+victim+": its shards move once their leases expire", o.ttl+10*time.Second, 0, func() error {
		c := child(victim)
		rec.kill(victim, time.Now())
		c.Kill()
		live = slices.DeleteFunc(live, func(n string) bool { return n == victim })
		return nil
	}); err != nil {
		return err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}

	if err := change("add an instance: the others hand it its share at once", 20*time.Second, maxFreeAfterJoin, func() error {
		name, err := start()
		if err != nil {
			return err
		}
		live = append(live, name)
		return nil
	}); err != nil {
		return err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}

	leaver := live[0]
	if err := change("SIGTERM "+leaver+": it drains, handing every shard over before it exits", 20*time.Second, 0, func() error {
		live = live[1:]
		return child(leaver).Signal(syscall.SIGTERM)
	}); err != nil {
		return err
	}
	if !child(leaver).Wait(4*o.ttl + 3*time.Second) {
		return fmt.Errorf("%s did not exit after draining", leaver)
	}
	return sleep(ctx, time.Second)
}

// busiest returns the live instance that runs the most shards.
func busiest(table map[string]string, live []string) string {
	counts := map[string]int{}
	for _, n := range table {
		counts[n]++
	}
	return slices.MaxFunc(live, func(a, b string) int {
		if c := cmp.Compare(counts[a], counts[b]); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
}

func (st step) print(w io.Writer, shards []string) {
	fmt.Fprintf(w, "\n%s\n", st.what)
	state := fmt.Sprintf("balanced in %v", st.took.Round(time.Millisecond))
	if !st.balanced {
		state = "NOT balanced"
	}
	need := fmt.Sprintf("the new shares need %d", st.least)
	if st.least < 0 {
		need = "the fleet forms"
	}
	fmt.Fprintf(w, "  %d shards on %d instances, %s; %d workloads started (%s)\n",
		len(shards), len(st.live), state, st.moved, need)
	if st.maxFree > 0 {
		which := ""
		if st.freeShard != "" {
			which = " (" + st.freeShard + ")"
		}
		fmt.Fprintf(w, "  longest a shard ran nowhere: %v%s; the verdict allows %v\n", st.free.Round(time.Millisecond),
			which, st.maxFree)
	}
	byInstance := map[string][]string{}
	for _, s := range shards {
		n := st.table[s]
		if n == "" {
			n = "(none)"
		}
		byInstance[n] = append(byInstance[n], strings.TrimPrefix(s, "tenant/"))
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range byInstance {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(w, "  %-6s %2d  tenant/{%s}\n", n, len(byInstance[n]), strings.Join(byInstance[n], ","))
	}
}

// summary is the verdict, computed from what the workloads reported.
type summary struct {
	shards   []string
	steps    []step
	runs     int
	overlaps []string
	accepted int
	rejected int
	problems []string
}

func summarize(r *recorder, s *summary) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	s.accepted, s.rejected = r.accepted, r.rejected
	for sh, runs := range r.runs {
		s.runs += len(runs)
		for i, a := range runs {
			for _, b := range runs[i+1:] {
				if a.start.Before(endOf(b)) && b.start.Before(endOf(a)) {
					s.overlaps = append(s.overlaps, fmt.Sprintf("%s on %s (token %d) and %s (token %d)",
						sh, a.name, a.token, b.name, b.token))
				}
			}
		}
	}
	if len(s.overlaps) > 0 {
		s.problems = append(s.problems, fmt.Sprintf("%d shards ran on two instances at once", len(s.overlaps)))
	}
	if s.rejected > 0 {
		s.problems = append(s.problems, fmt.Sprintf("%d fenced writes refused", s.rejected))
	}
	for _, st := range s.steps {
		if st.maxFree > 0 && st.free > st.maxFree {
			s.problems = append(s.problems, fmt.Sprintf("%s ran nowhere for %v after: %s (at most %v)",
				st.freeShard, st.free.Round(time.Millisecond), st.what, st.maxFree))
		}
		if !st.balanced {
			s.problems = append(s.problems, "not balanced after: "+st.what)
		} else if st.least >= 0 && st.moved > st.least+st.least/10 {
			s.problems = append(s.problems, fmt.Sprintf("%d moves after %q, where %d would do", st.moved, st.what, st.least))
		}
	}
	if len(s.steps) < 4 {
		s.problems = append(s.problems, "the script did not finish")
	}
}

func endOf(ru *span) time.Time {
	if ru.end.IsZero() {
		return demo.EndOfTime
	}
	return ru.end
}

// OK reports whether the verdict is a pass.
func (s *summary) OK() bool { return len(s.problems) == 0 }

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nVerdict (%d shard workload runs, from their own reports)\n", s.runs)
	fmt.Fprintf(w, "  overlaps       %d (a shard running on two instances at once, on this host's clock)\n", len(s.overlaps))
	for _, o := range s.overlaps {
		fmt.Fprintf(w, "                 %s\n", o)
	}
	fmt.Fprintf(w, "  fenced writes  %d accepted, %d refused (a lease.Fence per shard)\n", s.accepted, s.rejected)
	verdict := "PASS: every shard ran on one instance at a time, every step moved only what the new shares needed, " +
		"and no shard ran nowhere for longer than the verdict allows"
	if !s.OK() {
		verdict = "FAIL: " + strings.Join(s.problems, "; ")
	}
	fmt.Fprintf(w, "  verdict        %s\n", verdict)
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

// createBucket creates cfg's bucket on the servers at urls, or uses the one
// there.
func createBucket(ctx context.Context, urls []string, cfg natsstore.Config, log *slog.Logger) error {
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name("aster-shards-orchestrator"))
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
