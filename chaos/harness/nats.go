package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// NATS is nats-server in a process of its own (command chaos-nats), with a
// fixed port and store directory so that it can be killed and restarted.
type NATS struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	store  string
	starts int
	proc   *Proc
}

// StartNATS starts chaos-nats (the binary bin) with a store under dir, and
// waits until it accepts connections.
func StartNATS(t testing.TB, bin, dir string) (*NATS, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &NATS{t: t, bin: bin, dir: dir, port: port, store: filepath.Join(dir, "jetstream")}
	if err := os.MkdirAll(n.store, 0o755); err != nil {
		return nil, err
	}
	return n, n.Start()
}

// URL is the server's client URL.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// Addr is the server's host:port.
func (n *NATS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Start starts the server (again) and waits until it is ready.
func (n *NATS) Start() error {
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("nats-server is running")
	}
	p, err := Start(n.t, n.dir, "nats-server", n.bin, "-port", strconv.Itoa(n.port), "-store", n.store)
	if err != nil {
		return err
	}
	n.proc = p
	n.starts++
	return p.AwaitOutput("ready\n", n.starts, waitLimit)
}

// Kill kills the server with SIGKILL and waits until it is gone.
func (n *NATS) Kill() error { return n.proc.Kill() }

// Proc is the server's current process.
func (n *NATS) Proc() *Proc { return n.proc }

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
