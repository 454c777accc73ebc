//go:build unix

// Command scheduler shows a singleton that the whole fleet talks to: a
// sequencer that hands out numbers runs on whichever of three instances
// holds its lease, and caller processes ask it for numbers through package
// singleton. The leader is killed with SIGKILL, and the next one is stopped
// with SIGTERM, while the callers go on asking; every number handed out is
// unique and each caller's numbers strictly increase. The counter is kept
// in a JetStream KV key written with the term's fencing token, and each
// request's ID is recorded with its number, so that a request sent again
// after a crash gets the number it was given, not a new one.
//
//	go run ./examples/scheduler [-sequencers 3] [-callers 2] [-numbers 30] [-ttl 2s] [-nats-url nats://...] [-replicas 3]
//
// With -nats-url pointing at a JetStream cluster, -replicas 3 (or 5) gives
// the buckets it creates, the lease bucket and the bucket of the counter and
// the request IDs, that many replicas.
//
// The sequencers and callers are this binary, re-executed with a hidden
// first argument. It ends with a summary and exits by itself.
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
	defaultSequencers = 3
	defaultCallers    = 2
	defaultNumbers    = 30
	defaultTTL        = 2 * time.Second
	leaseID           = "scheduler.sequencer"
	bucket            = "aster_scheduler"    // leases
	dataBucket        = "aster_scheduler_kv" // the counter and the request IDs
	issuedSubject     = "scheduler.issued"   // callers report what they were given
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sequencerArg:
			os.Exit(sequencerMain(os.Args[2:]))
		case callerArg:
			os.Exit(callerMain(os.Args[2:]))
		}
	}
	os.Exit(orchestratorMain(os.Args[1:], os.Stdout, os.Stderr))
}

// options of one run of the example.
type options struct {
	sequencers, callers, numbers int
	ttl                          time.Duration
	urls                         []string // empty: an embedded server
	replicas                     int      // of the buckets, when created; 0 means 1
	out                          io.Writer
	exe                          string // "" means this binary
}

func orchestratorMain(args []string, stdout, stderr io.Writer) int {
	o := options{sequencers: defaultSequencers, callers: defaultCallers, numbers: defaultNumbers, ttl: defaultTTL, out: stdout}
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: scheduler [flags]

A sequencer runs on one of several instances (a singleton behind a lease);
caller processes ask it for numbers over NATS while its leader is killed
and then stopped. Every number is unique, and each caller's numbers
strictly increase.

Flags:
`)
		fs.PrintDefaults()
	}
	var urls string
	fs.IntVar(&o.sequencers, "sequencers", o.sequencers, "sequencer instances (2-9)")
	fs.IntVar(&o.callers, "callers", o.callers, "caller processes (1-9)")
	fs.IntVar(&o.numbers, "numbers", o.numbers, "numbers each caller asks for (10-10000)")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "the sequencer's lease `TTL`, whole seconds")
	fs.StringVar(&urls, "nats-url", os.Getenv("NATS_URL"), "NATS server `URLs`, comma-separated; empty starts an embedded server")
	fs.IntVar(&o.replicas, "replicas", 1, demo.ReplicasUsage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	o.urls = demo.SplitURLs(urls)
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "scheduler: unexpected arguments %q\n", fs.Args())
		return 2
	case o.sequencers < 2 || o.sequencers > 9:
		fmt.Fprintf(stderr, "scheduler: -sequencers must be between 2 and 9, got %d\n", o.sequencers)
		return 2
	case o.callers < 1 || o.callers > 9:
		fmt.Fprintf(stderr, "scheduler: -callers must be between 1 and 9, got %d\n", o.callers)
		return 2
	case o.numbers < 10 || o.numbers > 10000:
		fmt.Fprintf(stderr, "scheduler: -numbers must be between 10 and 10000, got %d\n", o.numbers)
		return 2
	case o.ttl < time.Second || o.ttl%time.Second != 0:
		fmt.Fprintf(stderr, "scheduler: -ttl must be a whole number of seconds, at least 1s, got %v\n", o.ttl)
		return 2
	}
	if err := demo.CheckReplicas(o.replicas, o.urls); err != nil {
		fmt.Fprintln(stderr, "scheduler:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, o)
	if sum != nil {
		sum.print(stdout)
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "scheduler:", err)
		return 1
	case !sum.ok():
		return 1
	}
	return 0
}
