//go:build unix

// Command shards shows sharded workers (package shard): instance processes
// share 16 shards, each running on exactly one of them with a fencing token
// of its own. The example kills one instance with SIGKILL (its shards move
// once their leases expire), adds one (the others hand it its share at
// once), and prints the assignment table after each step, then a verdict
// computed from what the workloads reported: no shard ran on two instances
// at once, no fenced write was refused, and each step moved no more shards
// than the new shares required. It exits by itself.
//
//	go run ./examples/shards [-instances 3] [-shards 16] [-ttl 2s] [-nats-url nats://...] [-replicas 3]
//
// With -nats-url pointing at a JetStream cluster, -replicas 3 (or 5) gives
// the lease bucket, when the instances create it, that many replicas.
//
// The instances are this binary, re-executed with a hidden first argument;
// the orchestrator keeps a fence per shard, on 127.0.0.1.
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
	defaultInstances = 3
	defaultShards    = 16
	defaultTTL       = 2 * time.Second
	defaultBucket    = "aster_shards_example"
	fleet            = "demo"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == instanceArg {
		os.Exit(instanceMain(os.Args[2:]))
	}
	os.Exit(orchestratorMain(os.Args[1:], os.Stdout, os.Stderr))
}

func orchestratorMain(args []string, stdout, stderr io.Writer) int {
	o := options{instances: defaultInstances, shards: defaultShards, ttl: defaultTTL, out: stdout}
	fs := flag.NewFlagSet("shards", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a mistake is one line, below; -help prints the usage
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: shards [flags]

Instance processes share shards (package shard), each shard on exactly one
instance with a fencing token; one instance is killed, one is added, and the
assignment table is printed after each step, then a verdict.

Flags:
`)
		fs.PrintDefaults()
	}
	var urls string
	fs.IntVar(&o.instances, "instances", o.instances, "number of instance processes at the start (2-8)")
	fs.IntVar(&o.shards, "shards", o.shards, "number of shards (1-256)")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "the leases' `TTL`, whole seconds: how long a killed instance's shards wait")
	fs.StringVar(&urls, "nats-url", os.Getenv("NATS_URL"), "NATS server `URLs`, comma-separated; empty starts an embedded server")
	fs.IntVar(&o.replicas, "replicas", 1, demo.ReplicasUsage)
	noColor := fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "no colours")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "shards: %v (run with -help for the flags)\n", err)
		return 2
	}
	o.urls = demo.SplitURLs(urls)
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "shards: unexpected arguments %q\n", fs.Args())
		return 2
	case o.instances < 2 || o.instances > 8:
		fmt.Fprintf(stderr, "shards: -instances must be between 2 and 8, got %d\n", o.instances)
		return 2
	case o.shards < 1 || o.shards > 256:
		fmt.Fprintf(stderr, "shards: -shards must be between 1 and 256, got %d\n", o.shards)
		return 2
	case o.ttl < time.Second || o.ttl%time.Second != 0:
		fmt.Fprintf(stderr, "shards: -ttl must be a whole number of seconds, at least 1s, got %v\n", o.ttl)
		return 2
	}
	if err := demo.CheckReplicas(o.replicas, o.urls); err != nil {
		fmt.Fprintln(stderr, "shards:", err)
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
		fmt.Fprintln(stderr, "shards:", err)
		return 1
	case !sum.OK():
		return 1
	}
	return 0
}
