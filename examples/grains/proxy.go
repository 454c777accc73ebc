//go:build unix

package main

import (
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections to a NATS server; freezing it stops every
// byte both ways (a partition of the member behind it), thawing resumes.
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen chan struct{} // closed on thaw; nil while not frozen
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) freeze(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.frozen == nil:
		p.frozen = make(chan struct{})
	case !on && p.frozen != nil:
		close(p.frozen)
		p.frozen = nil
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies src to dst, waiting while the proxy is frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		thaw := p.frozen
		p.mu.Unlock()
		if thaw != nil {
			<-thaw
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.freeze(false)
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
