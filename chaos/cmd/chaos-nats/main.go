// Command chaos-nats runs nats-server with JetStream in a process of its own,
// so that the chaos suite can SIGKILL it and start it again on the same port
// with the same store directory.
//
//	chaos-nats -port 4222 -store /tmp/js
//
// With -cluster-port and -routes it is one node of a JetStream cluster:
//
//	chaos-nats -name n1 -port 4222 -store /tmp/n1 -cluster-port 6222 \
//	    -routes nats://127.0.0.1:7001,nats://127.0.0.1:7002 -advertise 127.0.0.1:1
//
// Routes may go through proxies (the suite's partitions); -advertise sets
// the route address the node gossips to the others, which then connect
// there only when they have no configured route to it.
//
// It prints "ready" on stdout once it accepts connections, and shuts down
// cleanly on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

type options struct {
	name, store, routes, advertise string
	port, clusterPort, httpPort    int
}

func main() {
	var o options
	flag.StringVar(&o.name, "name", "chaos", "server name (a cluster node's)")
	flag.IntVar(&o.port, "port", 4222, "client port on 127.0.0.1")
	flag.StringVar(&o.store, "store", "", "JetStream store directory (required)")
	flag.IntVar(&o.clusterPort, "cluster-port", 0, "route port on 127.0.0.1 (0: no cluster)")
	flag.StringVar(&o.routes, "routes", "", "comma-separated route URLs of the other nodes")
	flag.StringVar(&o.advertise, "advertise", "", "route address gossiped to the other nodes")
	flag.IntVar(&o.httpPort, "http", 0, "monitoring port on 127.0.0.1 (0: none)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-nats:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.store == "" {
		return fmt.Errorf("-store is required")
	}
	opts := &server.Options{
		ServerName: o.name,
		Host:       "127.0.0.1",
		Port:       o.port,
		JetStream:  true,
		StoreDir:   o.store,
		NoSigs:     true,
		NoLog:      true,
	}
	if o.httpPort != 0 {
		opts.HTTPHost, opts.HTTPPort = "127.0.0.1", o.httpPort
	}
	if o.clusterPort != 0 {
		// Configured routes are retried forever; a route learned by gossip
		// (to the advertised address) is tried once (ConnectRetries 0).
		opts.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: o.clusterPort, Advertise: o.advertise}
		for _, r := range strings.Split(o.routes, ",") {
			if r == "" {
				continue
			}
			u, err := url.Parse(r)
			if err != nil {
				return fmt.Errorf("-routes: %w", err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("not ready for connections after 30s")
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
