package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATS is nats-server in a process of its own (command chaos-nats), with a
// fixed port and store directory so that it can be killed and restarted;
// alone, or one node of a Cluster.
type NATS struct {
	t      testing.TB
	bin    string
	dir    string
	name   string
	port   int
	http   int // monitoring port, 0 for none
	store  string
	extra  []string // cluster flags
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
	n := &NATS{t: t, bin: bin, dir: dir, name: "nats-server", port: port, store: filepath.Join(dir, "jetstream")}
	if err := os.MkdirAll(n.store, 0o755); err != nil {
		return nil, err
	}
	return n, n.Start()
}

// Name is the server's name (a cluster node's, as JetStream reports its
// stream leaders).
func (n *NATS) Name() string { return n.name }

// URL is the server's client URL.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// Addr is the server's host:port.
func (n *NATS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// StoreDir is the server's JetStream store directory.
func (n *NATS) StoreDir() string { return n.store }

// Start starts the server (again) and waits until it is ready.
func (n *NATS) Start() error {
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("%s is running", n.name)
	}
	args := append([]string{"-name", n.name, "-port", strconv.Itoa(n.port), "-store", n.store}, n.extra...)
	if n.http != 0 {
		args = append(args, "-http", strconv.Itoa(n.http))
	}
	p, err := Start(n.t, n.dir, n.name, n.bin, args...)
	if err != nil {
		return err
	}
	n.proc = p
	n.starts++
	return p.AwaitOutput("ready\n", n.starts, waitLimit)
}

// Kill kills the server with SIGKILL and waits until it is gone.
func (n *NATS) Kill() error { return n.proc.Kill() }

// Pause stops the server with SIGSTOP; Resume continues it.
func (n *NATS) Pause() error { return n.proc.Pause() }

// Resume continues a paused server.
func (n *NATS) Resume() error { return n.proc.Resume() }

// Stop shuts the server down gracefully (SIGTERM) and waits until it has.
func (n *NATS) Stop() error {
	err := n.proc.Terminate(waitLimit)
	if n.proc.Exited() {
		return nil
	}
	return err
}

// Proc is the server's current process.
func (n *NATS) Proc() *Proc { return n.proc }

// Get fetches path from the server's monitoring port (such as "/connz" or
// "/healthz"), and returns the body and the HTTP status.
func (n *NATS) Get(ctx context.Context, path string) ([]byte, int, error) {
	if n.http == 0 {
		return nil, 0, fmt.Errorf("%s has no monitoring port", n.name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", n.http, path), nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// Cluster is a JetStream cluster of chaos-nats processes whose routes all
// go through proxies, one per ordered pair of nodes, so that a node can be
// cut off from the others.
type Cluster struct {
	Nodes []*NATS
	// links[i][j] carries node i's route to node j.
	links [][]*Proxy
}

// StartCluster starts n nodes under dir, with their routes through proxies
// of ps, and waits until each accepts connections (not until JetStream has
// elected its leaders: clients retry).
func StartCluster(t testing.TB, bin, dir string, n int, ps *Proxies) (*Cluster, error) {
	c := &Cluster{links: make([][]*Proxy, n)}
	ports := make([][3]int, n) // client, route, monitoring
	for i := range ports {
		for k := range 3 {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			ports[i][k] = p
		}
	}
	for i := range n {
		c.links[i] = make([]*Proxy, n)
		for j := range n {
			if i == j {
				continue
			}
			p, err := ps.Proxy(t, fmt.Sprintf("route-n%d-n%d", i+1, j+1), net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[j][1])))
			if err != nil {
				return nil, err
			}
			c.links[i][j] = p
		}
	}
	for i := range n {
		var routes []string
		for j := range n {
			if i != j {
				routes = append(routes, c.links[i][j].URL())
			}
		}
		node := &NATS{t: t, bin: bin, dir: dir, name: fmt.Sprintf("n%d", i+1), port: ports[i][0], http: ports[i][2],
			store: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			// Every route goes through a link; the address gossiped is
			// closed, so that no node connects to another around them.
			extra: []string{"-cluster-port", strconv.Itoa(ports[i][1]), "-routes", strings.Join(routes, ","),
				"-advertise", "127.0.0.1:1"}}
		if err := os.MkdirAll(node.store, 0o755); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	errs := make(chan error, n)
	for _, node := range c.Nodes {
		go func() { errs <- node.Start() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return c, first
}

// URL is the comma-separated client URLs of every node.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *NATS {
	for _, n := range c.Nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Isolate cuts node k (0-based) off from every other node: the proxies of
// its routes reset every connection and refuse new ones until Heal.
func (c *Cluster) Isolate(k int) error {
	for j := range c.Nodes {
		if j == k {
			continue
		}
		if err := c.links[k][j].Drop(); err != nil {
			return err
		}
		if err := c.links[j][k].Drop(); err != nil {
			return err
		}
	}
	return nil
}

// Heal restores every route.
func (c *Cluster) Heal() error {
	for i := range c.links {
		for j, p := range c.links[i] {
			if i == j {
				continue
			}
			if err := p.Heal(); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitHealthy waits until every running node reports JetStream healthy
// (its monitoring /healthz), or fails after limit.
func (c *Cluster) WaitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		healthy := true
		for _, n := range c.Nodes {
			if n.proc.Exited() {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, code, err := n.Get(rctx, "/healthz")
			cancel()
			healthy = healthy && err == nil && code == http.StatusOK
		}
		if healthy {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the cluster is not healthy after %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
