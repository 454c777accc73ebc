//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

// options configure a run of the demo.
type options struct {
	instances int           // service instances at any time (2-9)
	ttl       time.Duration // the lease's TTL, whole seconds
	bucket    string
	domain    string // JetStream domain, "" for none
	apiPrefix string // JetStream API prefix (another account's JetStream), "" for none
	replicas  int    // replicas of the bucket when the demo creates it
	leaseID   string
	dial      natsstore.DialOptions // no URLs: start an embedded server
	settle    time.Duration         // how long the fleet runs between two faults
	interval  time.Duration         // between two dispatches of a leader

	out   io.Writer
	color bool
	live  bool       // draw a live status line (out is a terminal)
	width func() int // the terminal's width

	exe string // the binary to run instances with; "" means this one
}

// orchestrator is one run of the demo: the orchestrator's state.
type orchestrator struct {
	o    options
	log  *slog.Logger
	con  *demo.Console
	rec  *recorder
	hub  *hub
	dial natsstore.DialOptions
	exe  string

	mu   sync.Mutex
	kids map[string]*demo.Child
	next int // number of the next instance
}

// run runs the demo until its script ends or ctx is done, and returns its
// summary (partial when it did not finish). Whatever happens, every
// instance process it started has exited when it returns.
func run(ctx context.Context, o options) (*summary, error) {
	con := demo.NewConsole(o.out, o.live, o.width)
	defer con.Close()
	log := demo.NewLogger(con, !o.color)
	rec := newRecorder()
	d := &orchestrator{o: o, log: log, con: con, rec: rec, kids: map[string]*demo.Child{}, next: 1}

	exe, err := demo.Executable(o.exe)
	if err != nil {
		return nil, err
	}
	d.exe = exe
	d.dial = o.dial
	urls, stopServer, err := demo.Servers(ctx, d.dial.URLs, "aster-demo", log)
	if err != nil {
		return nil, err
	}
	defer stopServer() // and removes an embedded server's temporary store
	d.dial.URLs = urls

	// The orchestrator's own connection checks the deployment before any
	// instance starts, and watches the lease key: an independent observer
	// of every acquisition, release and expiry.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	dial := d.dial
	dial.Name = "aster-demo-orchestrator"
	store, err := natsstore.Dial(dctx, dial, natsstore.Config{Bucket: o.bucket, Domain: o.domain, APIPrefix: o.apiPrefix, Replicas: o.replicas})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	defer store.Close()
	log.Info("lease store ready", "bucket", store.Bucket(), "expiry", store.Expiry().String(), "lease", o.leaseID, "ttl", o.ttl)

	h, err := startHub(rec, log)
	if err != nil {
		return nil, err
	}
	defer h.close(2 * time.Second)
	d.hub = h
	log.Info("fenced outbox listening", "url", h.URL())

	wctx, wcancel := context.WithCancel(ctx)
	events, err := store.Watch(wctx, o.leaseID)
	if err != nil {
		wcancel()
		return nil, fmt.Errorf("watching the lease: %w", err)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range events {
			rec.observed(ev)
		}
	}()
	defer func() { wcancel(); <-watched }()

	// What an operator running `aster watch` beside the demo sees: one line
	// per change of holder, from the lease key alone.
	observations, err := lease.Observe(wctx, store, o.leaseID)
	if err != nil {
		return nil, fmt.Errorf("observing the lease: %w", err)
	}
	asterWatch := demo.NewPrefixWriter(con, "aster watch │ ")
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		var prev lease.Observation
		for first := true; ; first = false {
			ob, ok := <-observations
			if !ok {
				return
			}
			fmt.Fprintln(asterWatch, monitor.Describe(ob, prev, first))
			prev = ob
		}
	}()
	defer func() { wcancel(); <-observed }()

	defer d.stopAll() // runs first: instances need the hub and NATS to shut down

	con.SetStatus(rec.status)
	stopTick, ticked := make(chan struct{}), make(chan struct{})
	go func() { defer close(ticked); con.Tick(100*time.Millisecond, stopTick) }()
	defer func() { close(stopTick); <-ticked }()

	err = d.script(ctx)
	if err != nil {
		log.Error("the demo did not finish", tint.Err(err))
	}
	d.stopAll()
	sum := summarize(rec, o)
	sum.Complete = err == nil
	return sum, err
}

// script is the scenario.
func (d *orchestrator) script(ctx context.Context) error {
	o, rec := d.o, d.rec
	var first []string
	for range o.instances {
		name, err := d.spawn()
		if err != nil {
			return err
		}
		first = append(first, name)
	}
	if err := rec.WaitFor(ctx, 20*time.Second, "every instance to connect", func() bool {
		for _, n := range first {
			if rec.insts[n].owner == "" {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	// A lease left by an earlier run on an existing deployment expires
	// within a TTL.
	if err := rec.WaitFor(ctx, o.ttl+10*time.Second, "a first leader", func() bool {
		return rec.leaderWroteLocked("")
	}); err != nil {
		return err
	}
	if err := sleep(ctx, o.settle*3/2); err != nil {
		return err
	}

	// 1. Crash: the lease's TTL runs out since its last renewal, and a
	// standby that saw its revision unchanged for that long takes over.
	leader, token := rec.leader()
	d.step("crash: SIGKILL the leader; a standby takes over once the lease has gone a TTL without renewal (at most one TTL)",
		"leader", leader, "token", token, "ttl", o.ttl)
	if err := d.signal(leader, actKill); err != nil {
		return err
	}
	if err := d.waitTakeover(ctx, leader, o.ttl+5*time.Second); err != nil {
		return err
	}
	name, err := d.spawn()
	if err != nil {
		return err
	}
	d.log.Info("a new instance replaces the killed one", "inst", name, "replaces", leader)
	if err := rec.WaitFor(ctx, 20*time.Second, name+" to connect", func() bool {
		return rec.insts[name].owner != ""
	}); err != nil {
		return err
	}
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}

	// 2. Pause: the frozen leader's validity ends, a standby takes over;
	// thawed, its prepared write arrives with the old token.
	leader, token = rec.leader()
	d.step("pause: SIGSTOP the leader past its TTL; a standby takes over when the lease expires",
		"leader", leader, "token", token, "ttl", o.ttl)
	if err := d.signal(leader, actPause); err != nil {
		return err
	}
	if err := d.waitTakeover(ctx, leader, o.ttl+5*time.Second); err != nil {
		return err
	}
	d.step("thaw: SIGCONT the frozen instance; the write it prepared with its old token arrives late",
		"inst", leader, "token", token)
	if err := d.signal(leader, actResume); err != nil {
		return err
	}
	if err := rec.WaitFor(ctx, 5*time.Second, "the late write of "+leader+" to reach the fence", func() bool {
		return slices.ContainsFunc(rec.writes, func(w writeRec) bool { return w.req.Inst == leader && w.req.Late })
	}); err != nil {
		return err
	}
	if err := rec.WaitFor(ctx, 5*time.Second, leader+" to stand by again", func() bool {
		return rec.insts[leader].token == 0
	}); err != nil {
		return err
	}
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}

	// 3. Graceful: the leader releases, a standby takes over through the
	// watch.
	leader, token = rec.leader()
	d.step("graceful: SIGTERM the leader; it stops its workload and releases the lease, and a standby takes over through the watch",
		"leader", leader, "token", token)
	if err := d.signal(leader, actStop); err != nil {
		return err
	}
	if err := d.waitTakeover(ctx, leader, 5*time.Second); err != nil {
		return err
	}
	if err := sleep(ctx, o.settle/2); err != nil {
		return err
	}
	d.step("done: stopping every instance, standbys first")
	return nil
}

// step logs a step of the script.
func (d *orchestrator) step(msg string, args ...any) {
	d.log.Info("▶ "+msg, args...)
}

// waitTakeover waits until an instance other than old leads and has written
// through the fence, and logs the handover.
func (d *orchestrator) waitTakeover(ctx context.Context, old string, timeout time.Duration) error {
	rec := d.rec
	err := rec.WaitFor(ctx, timeout, "a standby to take over from "+old, func() bool {
		return rec.leaderWroteLocked(old)
	})
	if err != nil {
		return err
	}
	rec.Mu.Lock()
	name, token := rec.leaderLocked()
	t := rec.terms[token]
	var trigger time.Time
	for _, a := range rec.actions {
		if a.inst == old && a.token != 0 {
			trigger = a.at
		}
	}
	rec.Mu.Unlock()
	d.log.Info("handover done", "from", old, "to", name, "token", token,
		"acquired_after", round(t.acquired.Sub(trigger)), "first_write_after", round(t.firstAt.Sub(trigger)))
	return nil
}

// spawn starts the next instance.
func (d *orchestrator) spawn() (string, error) {
	d.mu.Lock()
	name := "i" + strconv.Itoa(d.next)
	d.next++
	d.mu.Unlock()

	args, env, err := d.instanceCommand(name)
	if err != nil {
		return "", err
	}
	out := demo.NewPrefixWriter(d.con, d.prefix(name))
	c, err := demo.StartChild(name, d.exe, args, env, out)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.kids[name] = c
	d.mu.Unlock()
	d.rec.started(name, c.PID())
	go func() {
		<-c.Done()
		d.rec.exited(name)
	}()
	return name, nil
}

// instanceCommand returns the arguments and the environment of instance
// name: its settings on its command line, the NATS connection's servers and
// secrets in its environment.
func (d *orchestrator) instanceCommand(name string) (args, env []string, err error) {
	js, err := json.Marshal(childDial(d.dial, "aster-demo-"+name))
	if err != nil {
		return nil, nil, err
	}
	args = []string{instanceArg,
		"-name", name,
		"-hub", d.hub.URL(),
		"-bucket", d.o.bucket,
		"-js-domain", d.o.domain,
		"-api-prefix", d.o.apiPrefix,
		"-inbox-prefix", d.dial.InboxPrefix,
		"-replicas", strconv.Itoa(d.o.replicas),
		"-lease", d.o.leaseID,
		"-ttl", d.o.ttl.String(),
		"-interval", d.o.interval.String(),
		"-color=" + strconv.FormatBool(d.o.color),
	}
	return args, []string{envDial + "=" + string(js)}, nil
}

// dialEnv is what an instance is told of the orchestrator's NATS dial
// options, as JSON in its environment: the servers, the credentials and the
// TLS files. The inbox prefix, no secret, is on its command line.
type dialEnv struct {
	URLs                          []string `json:"urls"`
	Name                          string   `json:"name"`
	CredentialsFile, NKeySeedFile string   `json:",omitempty"`
	User, Password, Token         string   `json:",omitempty"`
	CAFile, CertFile, KeyFile     string   `json:",omitempty"`
}

func childDial(d natsstore.DialOptions, name string) dialEnv {
	return dialEnv{
		URLs: d.URLs, Name: name,
		CredentialsFile: d.CredentialsFile, NKeySeedFile: d.NKeySeedFile,
		User: d.User, Password: d.Password, Token: d.Token,
		CAFile: d.CAFile, CertFile: d.CertFile, KeyFile: d.KeyFile,
	}
}

// options returns the dial options e describes.
func (e dialEnv) options() natsstore.DialOptions {
	return natsstore.DialOptions{
		URLs: e.URLs, Name: e.Name,
		CredentialsFile: e.CredentialsFile, NKeySeedFile: e.NKeySeedFile,
		User: e.User, Password: e.Password, Token: e.Token,
		CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile,
	}
}

// prefix is an instance's name in its own colour, for its log lines.
func (d *orchestrator) prefix(name string) string {
	if !d.o.color {
		return name + " │ "
	}
	n, _ := strconv.Atoi(name[1:])
	colors := []int{36, 35, 33, 34, 32, 96, 95, 93, 94}
	return fmt.Sprintf("\x1b[1;%dm%s\x1b[0m │ ", colors[(n-1)%len(colors)], name)
}

// signal records the action and sends its signal to instance name.
func (d *orchestrator) signal(name, kind string) error {
	d.mu.Lock()
	c := d.kids[name]
	d.mu.Unlock()
	if c == nil {
		return fmt.Errorf("no instance %q", name)
	}
	d.rec.act(kind, name)
	switch kind {
	case actKill:
		c.Kill()
		return nil
	case actPause:
		return c.Signal(syscall.SIGSTOP)
	case actResume:
		return c.Signal(syscall.SIGCONT)
	case actStop:
		return c.Signal(syscall.SIGTERM)
	}
	return fmt.Errorf("unknown action %q", kind)
}

// stopAll stops every instance still running: the standbys first, so that
// none of them takes over from the leader as it goes, then the rest. Each
// gets a bounded grace period, then SIGKILL. It is idempotent.
func (d *orchestrator) stopAll() {
	d.mu.Lock()
	kids := make([]*demo.Child, 0, len(d.kids))
	for _, c := range d.kids {
		if !c.Exited() {
			kids = append(kids, c)
		}
	}
	d.mu.Unlock()
	if len(kids) == 0 {
		return
	}
	leader, _ := d.rec.leader()
	var standbys, rest []*demo.Child
	for _, c := range kids {
		if c.Name() == leader {
			rest = append(rest, c)
		} else {
			standbys = append(standbys, c)
		}
	}
	grace := 3*d.o.ttl + 2*time.Second // the LeaseSupervisor's shutdown budget is under 2 TTL + 1 s
	for _, group := range [][]*demo.Child{standbys, rest} {
		var wg sync.WaitGroup
		for _, c := range group {
			d.rec.act(actStop, c.Name())
			wg.Go(func() {
				if !c.Stop(grace) {
					d.log.Warn("instance did not stop in time; killed", "inst", c.Name(), "grace", grace)
				}
			})
		}
		wg.Wait()
	}
}

// sleep waits d or until ctx is done.
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
