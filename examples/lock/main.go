//go:build unix

// Command lock shows the distributed lock and its fencing token: contender
// processes take turns holding the lock on a ledger and append entries to
// it through a fence; one holder is frozen with SIGSTOP in the middle of
// its job, past its TTL, another contender takes the lock over, and when
// the frozen holder is thawed with SIGCONT its next write, carrying its old
// token, is rejected by the fence. It ends with a summary computed from
// what it recorded, and exits by itself.
//
//	go run ./examples/lock [-contenders 3] [-ttl 1s] [-nats-url nats://...] [-replicas 3]
//
// With -nats-url pointing at a JetStream cluster, -replicas 3 (or 5) gives
// the lock's bucket, when it is created, that many replicas.
//
// The contenders are this binary, re-executed with a hidden first
// argument; the ledger and its fence live in the orchestrator, on
// 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
)

// Defaults of the example.
const (
	defaultContenders = 3
	defaultTTL        = time.Second
	defaultBucket     = "aster_lock_example"
	resource          = "ledger"
	defaultSteps      = 5
	defaultStep       = 100 * time.Millisecond
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == contenderArg {
		os.Exit(contenderMain(os.Args[2:]))
	}
	os.Exit(orchestratorMain(os.Args[1:], os.Stdout, os.Stderr))
}

func orchestratorMain(args []string, stdout, stderr io.Writer) int {
	o := options{contenders: defaultContenders, ttl: defaultTTL, steps: defaultSteps, step: defaultStep, out: stdout}
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a mistake is one line, below; -help prints the usage
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: lock [flags]

Contender processes take turns holding a distributed lock (package lock) on a
ledger and append entries through a lease.Fence; one holder is frozen with
SIGSTOP past its TTL, and its late write, with its old token, is rejected.

Flags:
`)
		fs.PrintDefaults()
	}
	var urls string
	fs.IntVar(&o.contenders, "contenders", o.contenders, "number of contender processes (2-9)")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "the lock's `TTL`, whole seconds")
	fs.StringVar(&urls, "nats-url", os.Getenv("NATS_URL"), "NATS server `URLs`, comma-separated; empty starts an embedded server")
	fs.IntVar(&o.replicas, "replicas", 1, demo.ReplicasUsage)
	noColor := fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "no colours")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "lock: %v (run with -help for the flags)\n", err)
		return 2
	}
	o.urls = demo.SplitURLs(urls)
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "lock: unexpected arguments %q\n", fs.Args())
		return 2
	case o.contenders < 2 || o.contenders > 9:
		fmt.Fprintf(stderr, "lock: -contenders must be between 2 and 9, got %d\n", o.contenders)
		return 2
	case o.ttl < time.Second || o.ttl%time.Second != 0:
		fmt.Fprintf(stderr, "lock: -ttl must be a whole number of seconds, at least 1s, got %v\n", o.ttl)
		return 2
	}
	if err := demo.CheckReplicas(o.replicas, o.urls); err != nil {
		fmt.Fprintln(stderr, "lock:", err)
		return 2
	}
	if f, ok := stdout.(*os.File); ok && demo.IsTerminal(f) {
		o.color = !*noColor
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, o)
	if sum != nil {
		sum.print(stdout)
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "lock:", err)
		return 1
	case !sum.OK():
		return 1
	}
	return 0
}
