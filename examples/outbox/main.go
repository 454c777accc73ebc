//go:build unix

// Command outbox is Aster's main demo, run by `make run`.
//
// It starts an embedded NATS server (or uses an existing deployment), a
// fenced outbox served on 127.0.0.1, and three instances of a service, each
// a separate OS process running this same binary. Every instance runs an
// outbox dispatcher as a singleton behind one lease (actors.LeaseSupervisor
// over natsstore), so only the leader dispatches, and every write carries
// the leader's fencing token through a lease.Fence. Then it kills the
// leader (SIGKILL), freezes the next one past its TTL (SIGSTOP, then
// SIGCONT: its write arrives late, with an old token, and is rejected),
// stops the next one gracefully (SIGTERM: handover through the watch, in
// milliseconds), and prints a summary of the handovers and the fence's
// verdict. Run it with --help for its flags; -nats-url with -replicas 3 runs
// it against a JetStream cluster with a 3-replica bucket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
)

// Defaults of the demo.
const (
	defaultInstances = 3
	defaultTTL       = 2 * time.Second
	defaultBucket    = "aster_demo"
	defaultLeaseID   = "demo.outbox"
	defaultInterval  = 100 * time.Millisecond
	defaultSettle    = time.Second
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == instanceArg {
		os.Exit(instanceMain(os.Args[2:]))
	}
	os.Exit(orchestratorMain(os.Args[1:], os.Stdout, os.Stderr))
}

// orchestratorMain runs the demo and returns the exit code: 0 when the
// fence's verdict is a pass, 1 when the demo failed, 2 for bad flags.
func orchestratorMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "outbox:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, o)
	if sum != nil {
		sum.print(o.out)
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "outbox:", err)
		return 1
	case !sum.OK():
		return 1
	}
	return 0
}

const usage = `Usage: outbox [flags]          (from the repository: make run ARGS="flags")

The Aster demo. It starts an embedded NATS server (unless -nats-url points to
one), a fenced outbox on 127.0.0.1, and -instances copies of this program as
separate processes. Each instance runs an outbox dispatcher as a singleton
behind one lease (actors.LeaseSupervisor over natsstore): only the leader
dispatches, and every write carries its fencing token through a lease.Fence.

Then the demo
  1. kills the leader with SIGKILL: a standby takes over once the lease has
     gone a TTL without renewal, within one TTL of the kill;
  2. freezes the next leader with SIGSTOP past its TTL, and a standby takes
     over; thawed with SIGCONT, the frozen instance sends the write it had
     prepared, with its old token, and the fence rejects it;
  3. stops the next leader with SIGTERM: it stops its workload and releases
     the lease, and a standby takes over through the watch, in milliseconds;
and prints each handover's kind and duration, the tokens, and the fence's
verdict. It takes about 2 TTL + 4 s and exits by itself; Ctrl-C stops it
early, and cleanly. Exit status: 0 when the verdict is a pass, 1 otherwise.

Flags:
`

const usageEnv = `
Environment: NATS_URL, NATS_CREDS, NATS_NKEY, NATS_USER, NATS_PASSWORD and
NATS_TOKEN give defaults to the matching flags (secrets are passed to the
instances in their environment, never on their command line); NO_COLOR turns
colours off.
`

// parseFlags parses the orchestrator's flags.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	o := options{
		instances: defaultInstances, ttl: defaultTTL, bucket: defaultBucket, leaseID: defaultLeaseID,
		settle: defaultSettle, interval: defaultInterval, out: stdout,
	}
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a mistake is one line, printed by the caller; -help prints the usage
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
		fmt.Fprint(out, usageEnv)
	}
	var urls string
	d := &o.dial
	fs.IntVar(&o.instances, "instances", o.instances, "number of service `instances` running at once (2-9)")
	fs.DurationVar(&o.ttl, "ttl", o.ttl, "lease `TTL`, in whole seconds (NATS per-message TTLs are whole seconds)")
	fs.StringVar(&urls, "nats-url", os.Getenv("NATS_URL"), "NATS server `URLs`, comma-separated; empty starts an embedded server")
	fs.StringVar(&d.CredentialsFile, "creds", os.Getenv("NATS_CREDS"), "NATS credentials `file` (user JWT and nkey seed)")
	fs.StringVar(&d.NKeySeedFile, "nkey", os.Getenv("NATS_NKEY"), "NATS user nkey seed `file`")
	fs.StringVar(&d.User, "user", os.Getenv("NATS_USER"), "NATS `user` name")
	fs.StringVar(&d.Password, "password", os.Getenv("NATS_PASSWORD"), "NATS `password`")
	fs.StringVar(&d.Token, "token", os.Getenv("NATS_TOKEN"), "NATS authentication `token`")
	fs.StringVar(&d.CAFile, "tls-ca", "", "`file` of the CA that signed the NATS server's certificate")
	fs.StringVar(&d.CertFile, "tls-cert", "", "client certificate `file` (with -tls-key)")
	fs.StringVar(&d.KeyFile, "tls-key", "", "client key `file` (with -tls-cert)")
	fs.StringVar(&o.bucket, "bucket", o.bucket, "JetStream KV `bucket` of the demo's lease; created if missing")
	fs.StringVar(&o.domain, "js-domain", "", "JetStream `domain` of the bucket, if any")
	fs.StringVar(&o.apiPrefix, "api-prefix", "", "JetStream API `prefix` under which the user's account imports "+
		"the JetStream of the account that holds the bucket, if any (not with -js-domain)")
	fs.StringVar(&d.InboxPrefix, "inbox-prefix", "", "`prefix` of the subjects replies and watch deliveries "+
		"arrive on (default _INBOX); with -api-prefix, the one the bucket's account exports")
	fs.IntVar(&o.replicas, "replicas", 1, demo.ReplicasUsage)
	noColor := fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "no colours, and no live status line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return o, err
		}
		return o, fmt.Errorf("%w (run with -help for the flags)", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (run with -help for the flags)", fs.Args())
	}
	d.URLs = demo.SplitURLs(urls)
	if err := demo.CheckReplicas(o.replicas, d.URLs); err != nil {
		return o, err
	}
	switch {
	case o.instances < 2 || o.instances > 9:
		return o, fmt.Errorf("-instances must be between 2 and 9, got %d", o.instances)
	case o.ttl < time.Second || o.ttl%time.Second != 0:
		return o, fmt.Errorf("-ttl must be a whole number of seconds, at least 1s, got %v", o.ttl)
	case len(d.URLs) == 0 && (d.CredentialsFile != "" || d.NKeySeedFile != "" || d.User != "" || d.Token != "" ||
		d.CAFile != "" || d.CertFile != "" || o.domain != "" || o.apiPrefix != "" || d.InboxPrefix != ""):
		return o, errors.New("credentials, TLS, domain and prefix flags need -nats-url (the embedded server needs none)")
	case o.domain != "" && o.apiPrefix != "":
		return o, errors.New("set -js-domain or -api-prefix, not both")
	}
	if err := checkPrefix("-api-prefix", strings.TrimSuffix(o.apiPrefix, ".")); err != nil {
		return o, err
	}
	if err := checkPrefix("-inbox-prefix", d.InboxPrefix); err != nil {
		return o, err
	}
	if err := (lease.Config{LeaseID: o.leaseID, OwnerID: "check", TTL: o.ttl}).Validate(); err != nil {
		return o, err
	}
	tty := false
	if f, ok := stdout.(*os.File); ok && demo.IsTerminal(f) {
		tty = true
		o.width = func() int { return demo.TermWidth(f) }
	}
	o.color = tty && !*noColor
	o.live = o.color
	return o, nil
}

// checkPrefix reports a subject prefix p that NATS would not take: one
// with a wildcard, a space or an empty token. "" is no prefix, and fine.
func checkPrefix(flag, p string) error {
	if p == "" {
		return nil
	}
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%s %q is not a subject prefix: dot-separated tokens, without wildcards or spaces", flag, p)
		}
	}
	return nil
}
