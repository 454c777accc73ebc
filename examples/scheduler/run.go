//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// leaderSeen is one term of the sequencer, as the orchestrator's watch saw
// it.
type leaderSeen struct {
	at       time.Time
	instance string
	token    lease.Token
}

// step is one thing the script did.
type step struct {
	at       time.Time
	what     string // SIGKILL, SIGTERM
	instance string
	token    lease.Token // the term it ended
}

// recorder keeps what the orchestrator observes; safe for concurrent use.
type recorder struct {
	demo.Board
	issued  []issued
	leaders []leaderSeen
	steps   []step
}

func (r *recorder) leader() (leaderSeen, bool) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if len(r.leaders) == 0 {
		return leaderSeen{}, false
	}
	return r.leaders[len(r.leaders)-1], true
}

// run runs the example and returns its summary; every child process has
// exited when it returns.
func run(ctx context.Context, o options) (*summary, error) {
	log := demo.NewLogger(o.out, true)
	rec := &recorder{}
	exe, err := demo.Executable(o.exe)
	if err != nil {
		return nil, err
	}
	urls, stopServer, err := demo.Servers(ctx, o.urls, "aster-scheduler-example", log)
	if err != nil {
		return nil, err
	}
	defer stopServer()
	url := strings.Join(urls, ",")
	replicas := strconv.Itoa(max(o.replicas, 1))

	nc, err := nats.Connect(url, nats.Name("scheduler-orchestrator"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	sub, err := nc.Subscribe(issuedSubject, func(m *nats.Msg) {
		var is issued
		if json.Unmarshal(m.Data, &is) != nil {
			return
		}
		rec.Mu.Lock()
		rec.issued = append(rec.issued, is)
		rec.Touch()
		rec.Mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()

	// An observer of the lease, independent of the instances.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	store, err := natsstore.Dial(dctx, natsstore.DialOptions{URLs: urls, Name: "scheduler-observer"}, natsstore.Config{Bucket: bucket, Replicas: o.replicas})
	cancel()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := store.Watch(wctx, leaseID)
	if err != nil {
		return nil, err
	}
	go func() {
		for ev := range events {
			if ev.Kind != lease.EventHeld || ev.Holder.OwnerID == "" {
				continue
			}
			rec.Mu.Lock()
			if n := len(rec.leaders); n == 0 || rec.leaders[n-1].token != ev.Holder.Token {
				rec.leaders = append(rec.leaders, leaderSeen{at: time.Now(), instance: ev.Holder.OwnerID, token: ev.Holder.Token})
				log.Info("the sequencer leads", "instance", ev.Holder.OwnerID, "token", ev.Holder.Token)
			}
			rec.Touch()
			rec.Mu.Unlock()
		}
	}()

	var (
		mu   sync.Mutex
		kids = map[string]*demo.Child{}
	)
	defer func() { // every path: stop every child, bounded
		mu.Lock()
		defer mu.Unlock()
		var wg sync.WaitGroup
		for _, c := range kids {
			wg.Go(func() { c.Stop(2*o.ttl + 3*time.Second) })
		}
		wg.Wait()
	}()
	console := demo.NewConsole(o.out, false, nil)
	startChild := func(name string, args ...string) (*demo.Child, error) {
		c, err := demo.StartChild(name, exe, args, nil, demo.NewPrefixWriter(console, name+" │ "))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		kids[name] = c
		mu.Unlock()
		return c, nil
	}
	sequencer := func(i int) error {
		name := "s" + strconv.Itoa(i)
		_, err := startChild(name, sequencerArg, "-name", name, "-nats-url", url, "-ttl", o.ttl.String(), "-replicas", replicas)
		return err
	}
	for i := 1; i <= o.sequencers; i++ {
		if err := sequencer(i); err != nil {
			return nil, err
		}
	}
	if err := rec.WaitFor(ctx, 30*time.Second, "a sequencer to lead", func() bool { return len(rec.leaders) > 0 }); err != nil {
		return nil, err
	}
	var callers []*demo.Child
	for i := 1; i <= o.callers; i++ {
		name := "c" + strconv.Itoa(i)
		c, err := startChild(name, callerArg, "-name", name, "-nats-url", url, "-numbers", strconv.Itoa(o.numbers),
			"-replicas", replicas)
		if err != nil {
			return nil, err
		}
		callers = append(callers, c)
	}

	total := o.callers * o.numbers
	strike := func(sig syscall.Signal, what string, after int) error {
		if err := rec.WaitFor(ctx, time.Minute, fmt.Sprintf("%d numbers", after), func() bool { return len(rec.issued) >= after }); err != nil {
			return err
		}
		l, _ := rec.leader()
		mu.Lock()
		c := kids[l.instance]
		mu.Unlock()
		if c == nil {
			return fmt.Errorf("the leader %s is not one of the instances", l.instance)
		}
		log.Warn(what+" the leader", "instance", l.instance, "token", l.token)
		rec.Mu.Lock()
		rec.steps = append(rec.steps, step{at: time.Now(), what: what, instance: l.instance, token: l.token})
		rec.Mu.Unlock()
		if err := c.Signal(sig); err != nil {
			return err
		}
		return rec.WaitFor(ctx, 2*o.ttl+10*time.Second, "the next leader", func() bool {
			return rec.leaders[len(rec.leaders)-1].token > l.token
		})
	}
	if err := strike(syscall.SIGKILL, "SIGKILL", total/3); err != nil {
		return nil, err
	}
	if err := sequencer(o.sequencers + 1); err != nil { // a replacement for the killed one
		return nil, err
	}
	if err := strike(syscall.SIGTERM, "SIGTERM", 2*total/3); err != nil {
		return nil, err
	}
	for _, c := range callers {
		select {
		case <-c.Done():
		case <-time.After(2 * time.Minute):
			return nil, fmt.Errorf("caller %s did not finish", c.Name())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	_ = rec.WaitFor(ctx, 5*time.Second, "every report", func() bool { return len(rec.issued) >= total })
	rec.Mu.Lock()
	defer rec.Mu.Unlock()
	return summarize(rec, o), nil
}

// summary is what the example checked.
type summary struct {
	want, got, failed, duplicates, notIncreasing int
	retried, mostAttempts                        int
	slowest                                      time.Duration
	leaders                                      []leaderSeen
	steps                                        []step
	first, last                                  uint64
	firstFailure                                 string
}

func summarize(r *recorder, o options) *summary {
	s := &summary{want: o.callers * o.numbers, leaders: r.leaders, steps: r.steps}
	seen := map[uint64]bool{}
	lastOf := map[string]uint64{}
	for _, is := range r.issued {
		if is.Err != "" {
			s.failed++
			if s.firstFailure == "" {
				s.firstFailure = is.Caller + ": " + is.Err
			}
			continue
		}
		s.got++
		if seen[is.Number] {
			s.duplicates++
		}
		seen[is.Number] = true
		if is.Number <= lastOf[is.Caller] {
			s.notIncreasing++
		}
		lastOf[is.Caller] = is.Number
		if is.Attempts > 1 {
			s.retried++
		}
		s.mostAttempts = max(s.mostAttempts, is.Attempts)
		s.slowest = max(s.slowest, is.Took)
		if s.first == 0 || is.Number < s.first {
			s.first = is.Number
		}
		s.last = max(s.last, is.Number)
	}
	return s
}

func (s *summary) ok() bool {
	return s.got == s.want && s.failed == 0 && s.duplicates == 0 && s.notIncreasing == 0
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintln(w, "\nSequencer terms (from the lease's watch)")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tinstance\ttoken\tended by\tnext leader after")
	for i, l := range s.leaders {
		ended, after := "–", "–"
		for _, st := range s.steps {
			if st.token == l.token {
				ended = st.what
				if i+1 < len(s.leaders) {
					after = s.leaders[i+1].at.Sub(st.at).Round(time.Millisecond).String()
				}
			}
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\n", i, l.instance, l.token, ended, after)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nNumbers")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  handed out\t%d of %d asked (%d to %d)\n", s.got, s.want, s.first, s.last)
	fmt.Fprintf(tw, "  failed requests\t%d\n", s.failed)
	if s.firstFailure != "" {
		fmt.Fprintf(tw, "  first failure\t%s\n", s.firstFailure)
	}
	fmt.Fprintf(tw, "  duplicates\t%d\n", s.duplicates)
	fmt.Fprintf(tw, "  out of order\t%d (a caller's numbers must strictly increase)\n", s.notIncreasing)
	fmt.Fprintf(tw, "  sent again\t%d requests (at most %d attempts; slowest %v)\n", s.retried, s.mostAttempts,
		s.slowest.Round(time.Millisecond))
	verdict := "PASS: every number unique, each caller's strictly increasing, across a crash and a handover"
	if !s.ok() {
		verdict = "FAIL"
	}
	fmt.Fprintf(tw, "  verdict\t%s\n", verdict)
	_ = tw.Flush()
}
