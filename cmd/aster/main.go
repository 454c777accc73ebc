// Command aster is the operator's view of Aster leases, locks and
// supervision trees kept in NATS: who holds each lease of a bucket, every
// handover as it happens, the status and trees of every instance (through
// the NATS micro service of package monitor), and a local NATS server for
// development.
//
//	go install ./cmd/aster  # from a clone of the repository
//
//	aster leases            the leases of a bucket: owner, metadata, term, token, age, validity, expiry
//	aster watch LEASE       who holds a lease, then every handover, live
//	aster shards PREFIX     a sharded fleet: every shard's holder and target, the members, the balance
//	aster status            every instance's leases, locks and health
//	aster tree INSTANCE     an instance's supervision trees
//	aster dev               a local NATS server with JetStream, for development
//
// It connects as the nats CLI does: --server (or NATS_URL), --creds,
// --nkey, --user and --password, --token, --tlscert, --tlskey and --tlsca
// (or NATS_CREDS, NATS_NKEY, NATS_USER, NATS_PASSWORD, NATS_TOKEN,
// NATS_CERT, NATS_KEY, NATS_CA). Every command takes --json. Every command
// that reads a bucket (leases, watch, shards) names it with --bucket
// (default aster_leases); `aster leases BUCKET` still works, deprecated.
// aster dev takes none of the connection flags: its server has no
// authentication.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/asterforge/aster/natsstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand.
type command struct {
	name, args, summary string
	// run runs it with its positional arguments; the common flags are set.
	run func(ctx context.Context, c *cli, args []string) error
	// flags adds the command's own flags.
	flags func(fs *flag.FlagSet, c *cli)
	// nargs is the number of positional arguments: min and max.
	min, max int
	// noConn: the command connects to nothing, and refuses the connection
	// flags rather than ignore them.
	noConn bool
}

var commands = []command{
	{name: "leases", summary: "list the leases of a bucket: owner, metadata, term, token, age, validity left, expiry mode",
		run: runLeases, flags: bucketFlag, max: 1}, // the one argument: the bucket, deprecated for --bucket
	{name: "watch", args: "LEASE", summary: "print who holds a lease, then every handover as it happens",
		run: runWatch, flags: watchFlags, min: 1, max: 1},
	{name: "shards", args: "PREFIX", summary: "a sharded fleet: each shard's holder and target, the members, whether it is balanced",
		run: runShards, flags: shardsFlags, min: 1, max: 1},
	{name: "status", summary: "the leases, locks and health of every instance, through the NATS micro service",
		run: runStatus, flags: discoveryFlags},
	{name: "tree", args: "INSTANCE", summary: "the supervision trees of one instance (its name or service ID)",
		run: runTree, flags: discoveryFlags, min: 1, max: 1},
	{name: "dev", summary: "run a local NATS server with JetStream and a store directory, for development",
		run: runDev, flags: devFlags, noConn: true},
}

// cli is the state of one invocation.
type cli struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	conn           connFlags
	json           bool
	bucket         string
	set            map[string]bool // the flags set on the command line
	// watch, shards
	count int
	// shards
	shardSet string
	live     bool
	// status, tree
	service string
	wait    time.Duration
	// dev
	store    string
	host     string
	port     int
	devReady func(url string) // tests: called once the dev server listens
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr, set: map[string]bool{}}
	c.conn.defaults(getenv)
	top := flag.NewFlagSet("aster", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	c.conn.register(top)
	top.BoolVar(&c.json, "json", false, "print JSON")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "aster: %v (aster help lists the commands and flags)\n", err)
		return 2
	}
	top.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	rest := top.Args()
	if len(rest) == 0 || rest[0] == "help" {
		if len(rest) > 1 {
			if cmd := find(rest[1]); cmd != nil {
				fs := c.flagSet(cmd)
				fs.SetOutput(stdout)
				fs.Usage()
				return 0
			}
		}
		w := stdout
		if len(rest) == 0 {
			w = stderr
		}
		usage(w)
		if len(rest) == 0 {
			return 2
		}
		return 0
	}
	cmd := find(rest[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "aster: unknown command %q\n\n", rest[0])
		usage(stderr)
		return 2
	}
	fs := c.flagSet(cmd)
	pos, err := parseInterspersed(fs, rest[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "aster %s: %v (aster help %s lists its flags)\n", cmd.name, err, cmd.name)
		return 2
	case len(pos) < cmd.min || len(pos) > cmd.max:
		fmt.Fprintf(stderr, "aster %s: expected %s\nusage: %s\n", cmd.name, argsWanted(cmd), usageLine(cmd))
		return 2
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if cmd.noConn {
		if err := refuseConnFlags(c.set); err != nil {
			fmt.Fprintf(stderr, "aster %s: %v\n", cmd.name, err)
			return 2
		}
	}
	if err := cmd.run(ctx, c, pos); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "aster %s: %v\n", cmd.name, err)
			return 2
		}
		fmt.Fprintf(stderr, "aster %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

func find(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usageLine is how cmd is called.
func usageLine(cmd *command) string {
	return strings.TrimSpace("aster " + cmd.name + " [flags] " + cmd.args)
}

func argsWanted(cmd *command) string {
	switch {
	case cmd.max == 0 || cmd.args == "":
		return "no arguments"
	case cmd.min == cmd.max:
		return cmd.args
	default:
		return "at most " + cmd.args
	}
}

// flagSet returns the flags of cmd: the connection flags (with what the
// command line set before the command as defaults), --json and its own.
func (c *cli) flagSet(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("aster "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.conn.register(fs)
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	if cmd.flags != nil {
		cmd.flags(fs, c)
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s.\n\nflags:\n", usageLine(cmd), upperFirst(cmd.summary))
		var hide map[string]bool
		if cmd.noConn { // refused, not shown
			hide = connFlagNames()
		}
		printFlags(w, fs, hide)
	}
	return fs
}

// bucketFlag adds --bucket, the one way every command names the bucket it
// reads.
func bucketFlag(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&c.bucket, "bucket", natsstore.DefaultBucket, "the KV `bucket` of the leases")
}

// refuseConnFlags returns an error naming the first connection flag set
// (on the command line; the environment is not a request), for a command
// that connects to nothing.
func refuseConnFlags(set map[string]bool) error {
	names := slices.Sorted(maps.Keys(connFlagNames()))
	names = slices.DeleteFunc(names, func(name string) bool { return !set[name] })
	if len(names) == 0 {
		return nil
	}
	return &usageError{fmt.Sprintf("--%s: the development server runs without authentication or TLS and takes "+
		"no connection flags (--host and --port choose where it listens; for a server with authentication, run "+
		"nats-server with a configuration file)", names[0])}
}

// connFlagNames returns the names of the connection flags.
func connFlagNames() map[string]bool {
	probe := flag.NewFlagSet("", flag.ContinueOnError)
	var f connFlags
	f.register(probe)
	names := map[string]bool{}
	probe.VisitAll(func(fl *flag.Flag) { names[fl.Name] = true })
	return names
}

// printFlags prints fs's flags as the nats CLI shows them: --name, with -s
// as the short form of --server.
func printFlags(w io.Writer, fs *flag.FlagSet, hide map[string]bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "s" || hide[f.Name] {
			return
		}
		name, use := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if f.Name == "server" {
			head = "  -s, --server"
		}
		if name != "" {
			head += " " + name
		}
		secret := f.Name == "password" || f.Name == "token"
		def := f.DefValue
		if f.Name == "server" {
			def = redact(def)
		}
		if def != "" && def != "false" && def != "0" && !secret {
			use += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%-32s %s\n", head, use)
	})
}

// parseInterspersed parses fs from args, accepting flags after positional
// arguments too (aster leases BUCKET --json), and returns the positional
// arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: aster <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-24s %s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run aster help <command> for its flags. Connection flags (--server, --creds, --nkey,")
	fmt.Fprintln(w, "--user, --password, --token, --tlscert, --tlskey, --tlsca, --timeout, --js-domain) and")
	fmt.Fprintln(w, "their environment variables (NATS_URL, NATS_CREDS, ...) are those of the nats CLI.")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
