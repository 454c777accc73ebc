//go:build unix

// Command grains shows virtual actors (package grains) on protoactor-go's
// cluster of three member processes, one killed, one paused and one cut off
// from NATS while callers keep calling: every activation of a counter grain
// holds a lock under its member's session, and each message is one write,
// with the activation's fencing token, to a store that fences the writes.
//
// The parent process starts an embedded NATS server, a TCP proxy per
// member in front of it (to cut a member off from NATS), the counter store
// (served to the members over NATS request/reply) and three members a, b
// and c, re-executing its own binary. Member a calls 16 counter grains
// throughout and is never struck. The parent then kills member c (SIGKILL)
// and starts member d in its place, pauses member b for three TTLs
// (SIGSTOP, then SIGCONT), and cuts member d off from NATS for three TTLs
// (its proxy frozen, then thawed). It prints a line per step, then the
// verdict, and exits (1 on FAIL): duplicate activations (two activations
// of one identity acting at once), calls lost (a call that did not succeed
// within its 20 s deadline) and stale writes accepted (a write the store
// took with a token below one it took before) must all be 0, with calls
// made.
//
//	go run ./examples/grains [-ttl 2s] [-identities 16]
//
// It takes about 40 s at the default TTL of 2 s.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/natsstore/embedded"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

func run(args []string, out io.Writer) int {
	if len(args) > 0 && args[0] == memberArg {
		return runMember(args[1:])
	}
	fs := flag.NewFlagSet("grains", flag.ContinueOnError)
	ttl := fs.Duration("ttl", 2*time.Second, "the members' session TTL, whole seconds")
	ids := fs.Int("identities", 16, "number of counter grains")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(out, "grains:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := scenario(ctx, out, exe, *ttl, *ids); err != nil {
		fmt.Fprintln(out, "grains:", err)
		return 1
	}
	return 0
}

// scenario runs the members as processes of exe and strikes them.
func scenario(ctx context.Context, out io.Writer, exe string, ttl time.Duration, n int) error {
	began := time.Now()
	srv, err := embedded.Start(ctx, embedded.Config{})
	if err != nil {
		return err
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	st := newStore()
	sub, err := st.serve(nc)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()

	proxies := map[string]*proxy{}
	procs := map[string]*proc{}
	defer func() { // every member process ends before its proxy, on every path
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(p.stop) // at once: 15 s at most in all
		}
		wg.Wait()
		for _, p := range proxies {
			p.close()
		}
	}()
	start := func(name string, calls bool) error {
		p, err := startProxy(srv.ClientURL()[len("nats://"):])
		if err != nil {
			return err
		}
		proxies[name] = p
		pr, err := startProc(exe, name, p.url(), ttl, n, calls, 30*time.Second)
		if err != nil {
			return err
		}
		procs[name] = pr
		fmt.Fprintf(out, "%5.1fs member %s joined (process %d)\n", time.Since(began).Seconds(), name, pr.PID())
		return nil
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := start(name, name == "a"); err != nil {
			return err
		}
	}

	count := func(what string) (totals, error) {
		wait := 15 * time.Second
		if what == "stop" {
			wait = 30 * time.Second // the calls in flight take 20 s at most
		}
		var t totals
		msg, err := nc.Request(callsSubject+"a", []byte(what), wait)
		if err == nil {
			err = json.Unmarshal(msg.Data, &t)
		}
		return t, err
	}
	step := func(what string, d time.Duration) error {
		t, err := count("count")
		if err != nil {
			return fmt.Errorf("member a's calls: %w", err)
		}
		fmt.Fprintf(out, "%5.1fs %-44s calls ok %d, lost %d\n", time.Since(began).Seconds(), what, t.OK, t.Lost)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if _, err := count("start"); err != nil {
		return fmt.Errorf("start member a's calls: %w", err)
	}
	if err := step(fmt.Sprintf("member a calls %d counter grains", n), 2*ttl); err != nil {
		return err
	}
	if err := procs["c"].kill(); err != nil {
		return err
	}
	if err := step("member c killed (SIGKILL)", 0); err != nil {
		return err
	}
	if err := start("d", false); err != nil {
		return err
	}
	if err := step("member d started in its place", 3*ttl); err != nil {
		return err
	}
	if err := procs["b"].Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if err := step("member b paused (SIGSTOP)", 3*ttl); err != nil {
		return err
	}
	if err := procs["b"].Signal(syscall.SIGCONT); err != nil {
		return err
	}
	if err := step("member b continued (SIGCONT)", 2*ttl); err != nil {
		return err
	}
	proxies["d"].freeze(true)
	if err := step("member d partitioned from NATS", 3*ttl); err != nil {
		return err
	}
	proxies["d"].freeze(false)
	if err := step("member d healed", 2*ttl); err != nil {
		return err
	}
	t, err := count("stop")
	if err != nil {
		return fmt.Errorf("member a's calls: %w", err)
	}
	fmt.Fprintf(out, "%5.1fs %-44s calls ok %d, lost %d\n", time.Since(began).Seconds(), "member a's calls stopped", t.OK, t.Lost)

	dups, stale, moved := st.verdict()
	fmt.Fprintf(out, "\nwrites accepted, per member: %s; %d identities moved at least once\n", st.accepted(), moved)
	fmt.Fprintf(out, "writes refused by the fence, per member: %s\n", st.refusedWrites())
	fmt.Fprintf(out, "duplicate activations: %d\ncalls lost: %d\nstale writes accepted: %d\n", dups, t.Lost, stale)
	if dups == 0 && t.Lost == 0 && stale == 0 && t.OK > 0 {
		fmt.Fprintln(out, "PASS")
		return nil
	}
	fmt.Fprintln(out, "FAIL")
	return errors.New("the verdict failed")
}
