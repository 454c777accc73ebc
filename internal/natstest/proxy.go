package natstest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server's client port, so that a test
// can cut its clients' connections while the server keeps running: the
// clients reconnect through the proxy, to the same server.
//
//	p := natstest.StartProxy(t, srv.ClientURL())
//	nc, err := nats.Connect(p.URL(), nats.IgnoreDiscoveredServers())
//	p.Cut() // nc reconnects
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// StartProxy starts a proxy on a loopback port to target (a nats:// URL or
// host:port) and registers its shutdown with t.Cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: start a proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(target, "nats://"), conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// URL returns the proxy's client URL, nats://127.0.0.1:port.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut closes every connection through the proxy; new ones are forwarded as
// before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	defer p.untrack(client, server)
	var wg sync.WaitGroup
	wg.Go(func() { copyThenClose(client, server) })
	copyThenClose(server, client)
	client.Close()
	wg.Wait()
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
