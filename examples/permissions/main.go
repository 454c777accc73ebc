// Command permissions prints the NATS permissions a service account needs to
// use a natsstore bucket, for the way it reaches JetStream, and with -check
// proves them: it starts nats-server in the process in that topology, with
// a user that has exactly those permissions, and has that user open the
// bucket, acquire, renew and release a lease, see the release through a
// watch, and watch several MiB of updates of a scratch key (which proves
// that flow control works); then, for each permission whose absence the
// store reports at once, a user without it, who must be refused with
// natsstore.ErrPermission.
//
//	go run ./examples/permissions -bucket aster_leases
//	go run ./examples/permissions -domain hub            # connected to a server of domain hub
//	go run ./examples/permissions -domain hub -leaf      # connected to a leaf node of it
//	go run ./examples/permissions -api-prefix JS.A.API -inbox-prefix _INBOX_SVC -exporter A
//	go run ./examples/permissions -check -domain hub -leaf
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("permissions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bucket := fs.String("bucket", natsstore.DefaultBucket, "the KV `bucket`")
	var top natstest.Topology
	fs.StringVar(&top.Domain, "domain", "", "the JetStream `domain` of the servers that hold the bucket (natsstore.Config.Domain)")
	fs.BoolVar(&top.Leaf, "leaf", false, "the service connects to a leaf node and reaches -domain through it "+
		"(without it: to a server of the domain, which maps the domain's API before it checks permissions)")
	fs.StringVar(&top.APIPrefix, "api-prefix", "", "the `prefix` under which the service's account imports "+
		"the JetStream API of the account that holds the bucket (natsstore.Config.APIPrefix)")
	fs.StringVar(&top.InboxPrefix, "inbox-prefix", "", "the service's inbox `prefix` (natsstore.DialOptions.InboxPrefix); "+
		"default _INBOX")
	exporter := fs.String("exporter", "JS", "with -api-prefix: the `account` that holds the bucket")
	create := fs.Bool("create", false, "include the permission to create the bucket")
	check := fs.Bool("check", false, "prove the permissions against nats-server in the process, in this topology")
	mon := fs.Bool("monitor", false, "also print what a process that registers the monitor micro service, "+
		"and an operator who runs aster status and aster tree, need")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := top.Validate(); err != nil {
		fmt.Fprintln(stderr, "permissions:", err)
		return 2
	}
	if top.APIPrefix != "" && top.InboxPrefix == "" {
		fmt.Fprintln(stderr, "permissions: with -api-prefix, set -inbox-prefix to a prefix of the service's own: "+
			"the account that holds the bucket exports the watch's deliveries on it")
		return 2
	}
	pub, sub := natstest.Permissions(*bucket, top)
	fmt.Fprint(stdout, config(pub, sub, *create))
	if top.APIPrefix != "" {
		fmt.Fprint(stdout, accounts(*bucket, *exporter, top, *create))
	}
	if *mon {
		fmt.Fprint(stdout, monitorPermissions(top))
	}
	if !*check {
		return 0
	}
	fmt.Fprintln(stdout)
	if err := Check(context.Background(), *bucket, top, stdout); err != nil {
		fmt.Fprintln(stderr, "permissions:", err)
		return 1
	}
	if *mon {
		if err := CheckMonitor(context.Background(), *bucket, top, stdout); err != nil {
			fmt.Fprintln(stderr, "permissions:", err)
			return 1
		}
	}
	return 0
}

// config renders the permissions as a nats-server authorization block.
func config(pub []natstest.Permission, sub []string, create bool) string {
	var b strings.Builder
	b.WriteString("permissions: {\n  publish: { allow: [\n")
	for _, p := range pub {
		if p.Create && !create {
			continue
		}
		kind := "required"
		if p.Create {
			kind = "only if the store is to"
		}
		fmt.Fprintf(&b, "    %q, # %s: %s\n", p.Subject, kind, p.Why)
	}
	b.WriteString("  ] }\n  subscribe: { allow: [\n")
	for _, s := range sub {
		fmt.Fprintf(&b, "    %q, # required: replies, and a watch's deliveries\n", s)
	}
	b.WriteString("  ] }\n}\n")
	return b.String()
}

// monitorPermissions renders what the monitor's micro service and the
// operator's aster status need.
func monitorPermissions(top natstest.Topology) string {
	svcPub, svcSub, opPub, opSub := natstest.MonitorPermissions("aster", top.Inbox())
	var b strings.Builder
	b.WriteString("\n# A process that registers the monitor micro service (monitor.Registry.Service) adds:\n")
	fmt.Fprintf(&b, "#   publish:   %s   (its replies; or allow_responses: true)\n", quoted(svcPub))
	fmt.Fprintf(&b, "#   subscribe: %s   (discovery, and the status, leases and tree endpoints)\n", quoted(svcSub))
	b.WriteString("# An operator who runs aster status and aster tree (nats micro ls too) needs:\n")
	fmt.Fprintf(&b, "#   publish:   %s\n", quoted(opPub))
	fmt.Fprintf(&b, "#   subscribe: %s\n", quoted(opSub))
	return b.String()
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// accounts renders the exports and imports of a cross-account setup.
func accounts(bucket, exporter string, top natstest.Topology, create bool) string {
	exports, imports := natstest.CrossAccount(bucket, exporter, top, create)
	var b strings.Builder
	fmt.Fprintf(&b, "\n# In account %s, which holds the bucket:\nexports: [\n", exporter)
	for _, e := range exports {
		fmt.Fprintf(&b, "  %s,\n", e)
	}
	b.WriteString("]\n# In the service's account:\nimports: [\n")
	for _, i := range imports {
		fmt.Fprintf(&b, "  %s,\n", i)
	}
	b.WriteString("]\n")
	return b.String()
}
