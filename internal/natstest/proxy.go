package natstest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a server, and can
// freeze them: while frozen, no byte passes in either direction, but every
// connection stays open. A client then sees its requests time out while it
// still counts itself connected, as behind a stalled network path. Cut
// drops every connection instead, while the server keeps running: the
// clients reconnect through the proxy, to the same server.
//
//	p := natstest.StartProxy(t, srv.ClientURL())
//	nc, err := nats.Connect(p.URL(), nats.IgnoreDiscoveredServers())
//	p.Cut() // nc reconnects
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string        // host:port
	thaw   chan struct{} // closed when the proxy thaws; nil while not frozen
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartProxy starts a proxy to target (a nats:// URL or host:port) and
// closes it, and every connection through it, when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(target, "nats://"), conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL returns the URL clients connect to.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Freeze stops (on) or resumes (off) the traffic of every connection.
func (p *Proxy) Freeze(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.thaw == nil:
		p.thaw = make(chan struct{})
	case !on && p.thaw != nil:
		close(p.thaw)
		p.thaw = nil
	}
}

// Retarget makes the proxy forward new connections to target (a nats://
// URL or host:port); those it holds keep their server until Cut.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = strings.TrimPrefix(target, "nats://")
}

// Cut closes every connection through the proxy; new ones are accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close closes the listener and every connection, and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
		if p.thaw != nil {
			close(p.thaw)
			p.thaw = nil
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track registers a pair of connections; false when the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, holding what it read while frozen.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer func() { _ = src.Close(); _ = dst.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the other direction ends with the close
		}
	}
}

// wait blocks while the proxy is frozen; false when it closed meanwhile.
func (p *Proxy) wait() bool {
	for {
		p.mu.Lock()
		thaw, closed := p.thaw, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if thaw == nil {
			return true
		}
		<-thaw
	}
}
