//go:build unix

package demo

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is an in-process nats-server with JetStream on 127.0.0.1.
type NATS struct{ srv *server.Server }

// StartNATS starts a server keeping its JetStream store in dir, on a port
// the kernel picks.
func StartNATS(dir string) (*NATS, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "aster-demo",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded NATS: not ready within 10s")
	}
	return &NATS{srv: srv}, nil
}

// URL is the server's client URL.
func (e *NATS) URL() string { return e.srv.ClientURL() }

// Close shuts the server down and waits until it has.
func (e *NATS) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
