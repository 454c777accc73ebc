//go:build unix

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedNATS is an in-process nats-server with JetStream on 127.0.0.1.
type embeddedNATS struct{ srv *server.Server }

// startNATS starts a server keeping its JetStream store in dir, on a port
// the kernel picks.
func startNATS(dir string) (*embeddedNATS, error) {
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
	return &embeddedNATS{srv: srv}, nil
}

func (e *embeddedNATS) URL() string { return e.srv.ClientURL() }

func (e *embeddedNATS) Close() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
