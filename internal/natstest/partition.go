package natstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Partition cuts servers of a cluster started by StartPartitionedCluster off
// from the others while they keep running and serving their clients: the
// network partition that in-process servers otherwise cannot have.
//
// Every route between two servers runs through a TCP proxy in the test
// process, in front of the route port of the server dialled. A server
// advertises its proxy as its route address, so that the routes the servers
// discover by gossip go through the proxies too. The proxy learns which server
// dialled from the route's first protocol line (CONNECT, which names the
// dialling server's ID), and refuses or cuts every route that has an isolated
// server at either end.
type Partition struct {
	cluster *Cluster
	proxies []*routeProxy

	mu       sync.Mutex
	isolated map[int]bool // by index in cluster.Servers
}

// StartPartitionedCluster is StartCluster with every route through a proxy
// that Partition controls. opts apply to every server.
func StartPartitionedCluster(t testing.TB, n int, opts ...Option) (*Cluster, *Partition) {
	t.Helper()
	p := &Partition{isolated: make(map[int]bool)}
	for i := range n {
		rp, err := newRouteProxy(p, i)
		if err != nil {
			t.Fatalf("natstest: start a route proxy: %v", err)
		}
		t.Cleanup(rp.close)
		p.proxies = append(p.proxies, rp)
	}
	route := WithOptions(func(o *server.Options) {
		i := serverIndex(o.ServerName)
		if i < 0 || i >= n {
			return
		}
		rp := p.proxies[i]
		rp.setTarget(net.JoinHostPort(o.Cluster.Host, strconv.Itoa(o.Cluster.Port)))
		o.Cluster.Advertise = rp.addr()
		o.Routes = nil
		for j, other := range p.proxies {
			if j != i {
				o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: other.addr()})
			}
		}
	})
	c := StartCluster(t, n, append(opts, route)...)
	p.mu.Lock()
	p.cluster = c
	p.mu.Unlock()
	return c, p
}

// serverIndex returns i for a server named "<cluster>-n<i+1>", or -1.
func serverIndex(name string) int {
	at := strings.LastIndex(name, "-n")
	if at < 0 {
		return -1
	}
	i, err := strconv.Atoi(name[at+2:])
	if err != nil {
		return -1
	}
	return i - 1
}

// Isolate cuts s off from every other server: its routes are closed and
// refused until Heal. s keeps running, and its clients stay connected to it.
func (p *Partition) Isolate(s *Server) {
	p.mu.Lock()
	for i, cs := range p.cluster.Servers {
		if cs == s {
			p.isolated[i] = true
		}
	}
	p.mu.Unlock()
	for _, rp := range p.proxies {
		rp.cut()
	}
}

// Heal ends every isolation; the servers route to each other again.
func (p *Partition) Heal() {
	p.mu.Lock()
	clear(p.isolated)
	p.mu.Unlock()
}

// allowed reports whether a route from the server whose ID is src ("" when
// unknown) to server dest (an index in the cluster) may carry traffic.
func (p *Partition) allowed(src string, dest int) bool {
	i := p.serverByID(src)
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.isolated[dest] && (i < 0 || !p.isolated[i])
}

// serverByID returns the index of the running server whose ID is id, or -1.
func (p *Partition) serverByID(id string) int {
	p.mu.Lock()
	c := p.cluster
	p.mu.Unlock()
	if c == nil || id == "" {
		return -1
	}
	for i, s := range c.Servers {
		if srv := s.NATS(); srv != nil && srv.ID() == id {
			return i
		}
	}
	return -1
}

// routeProxy forwards route connections to one server's route port.
type routeProxy struct {
	p    *Partition
	ln   net.Listener
	dest int // the index of the server behind the proxy

	mu     sync.Mutex
	target string
	conns  map[*routeConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// routeConn is one proxied route.
type routeConn struct {
	src          string // the dialling server's ID, "" while unknown
	client, peer net.Conn
}

func newRouteProxy(p *Partition, dest int) (*routeProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rp := &routeProxy{p: p, ln: ln, dest: dest, conns: make(map[*routeConn]struct{})}
	rp.wg.Go(rp.accept)
	return rp, nil
}

func (rp *routeProxy) addr() string { return rp.ln.Addr().String() }

func (rp *routeProxy) setTarget(target string) {
	rp.mu.Lock()
	rp.target = target
	rp.mu.Unlock()
}

func (rp *routeProxy) accept() {
	for {
		c, err := rp.ln.Accept()
		if err != nil {
			return
		}
		rp.wg.Go(func() { rp.serve(c) })
	}
}

// firstLineTimeout bounds the wait for a dialler's CONNECT line.
const firstLineTimeout = 5 * time.Second

// serve forwards one route connection until either side closes it or the
// partition cuts it.
func (rp *routeProxy) serve(client net.Conn) {
	rp.mu.Lock()
	target, closed := rp.target, rp.closed
	rp.mu.Unlock()
	if closed || target == "" || !rp.p.allowed("", rp.dest) {
		client.Close()
		return
	}
	peer, err := net.DialTimeout("tcp", target, firstLineTimeout)
	if err != nil {
		client.Close()
		return
	}
	rc := &routeConn{client: client, peer: peer}
	if !rp.track(rc) {
		return
	}
	defer rp.untrack(rc)

	var wg sync.WaitGroup
	defer wg.Wait()
	// The dialled server speaks first only with INFO; the dialler's first
	// line is CONNECT, naming it.
	wg.Go(func() { copyThenClose(client, peer) })
	_ = client.SetReadDeadline(time.Now().Add(firstLineTimeout))
	r := bufio.NewReader(client)
	line, err := r.ReadBytes('\n')
	_ = client.SetReadDeadline(time.Time{})
	if err != nil {
		rc.close()
		return
	}
	src := connectName(line)
	rp.mu.Lock()
	rc.src = src
	rp.mu.Unlock()
	if !rp.p.allowed(src, rp.dest) {
		rc.close()
		return
	}
	if _, err := peer.Write(line); err != nil {
		rc.close()
		return
	}
	copyThenClose(peer, r)
	rc.close()
}

// connectName returns the "name" field of a CONNECT protocol line, or "".
func connectName(line []byte) string {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("CONNECT "))
	if !ok {
		return ""
	}
	var c struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(rest, &c) != nil {
		return ""
	}
	return c.Name
}

// copyThenClose copies src to dst until either fails, then closes dst.
func copyThenClose(dst net.Conn, src io.Reader) {
	_, _ = io.Copy(dst, src)
	dst.Close()
}

func (rc *routeConn) close() {
	rc.client.Close()
	rc.peer.Close()
}

func (rp *routeProxy) track(rc *routeConn) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.closed {
		rc.close()
		return false
	}
	rp.conns[rc] = struct{}{}
	return true
}

func (rp *routeProxy) untrack(rc *routeConn) {
	rp.mu.Lock()
	delete(rp.conns, rc)
	rp.mu.Unlock()
}

// cut closes the connections the partition no longer allows.
func (rp *routeProxy) cut() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for rc := range rp.conns {
		if !rp.p.allowed(rc.src, rp.dest) {
			rc.close()
		}
	}
}

// close stops the proxy and every connection through it.
func (rp *routeProxy) close() {
	rp.mu.Lock()
	rp.closed = true
	for rc := range rp.conns {
		rc.close()
	}
	rp.mu.Unlock()
	rp.ln.Close()
	rp.wg.Wait()
}
