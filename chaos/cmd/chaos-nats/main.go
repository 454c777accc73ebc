// Command chaos-nats runs nats-server with JetStream in a process of its own,
// so that the chaos suite can SIGKILL it and start it again on the same port
// with the same store directory.
//
//	chaos-nats -port 4222 -store /tmp/js
//
// It prints "ready" on stdout once it accepts connections, and shuts down
// cleanly on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	port := flag.Int("port", 4222, "client port on 127.0.0.1")
	store := flag.String("store", "", "JetStream store directory (required)")
	flag.Parse()
	if err := run(*port, *store); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-nats:", err)
		os.Exit(1)
	}
}

func run(port int, store string) error {
	if store == "" {
		return fmt.Errorf("-store is required")
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "chaos",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		NoSigs:     true,
		NoLog:      true,
	})
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
