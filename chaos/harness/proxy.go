package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxies is an in-process toxiproxy server: one proxy per holder, so that
// network faults can strike one holder or all of them.
type Proxies struct {
	api *toxiproxy.ApiServer
}

// NewProxies returns a quiet toxiproxy server; every proxy it makes is
// stopped by t.Cleanup.
func NewProxies() *Proxies {
	return &Proxies{api: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
}

// Proxy forwards a listening loopback port to an upstream address, with
// toxics that break the traffic on demand.
type Proxy struct {
	p *toxiproxy.Proxy

	mu     sync.Mutex
	toxics []string
}

// Proxy starts a proxy to upstream on a free loopback port.
func (ps *Proxies) Proxy(t testing.TB, name, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(ps.api, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p}, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.p.Listen }

// URL is the nats:// URL of the proxy.
func (p *Proxy) URL() string { return "nats://" + p.p.Listen }

// Direction of the traffic a toxic acts on.
type Direction string

// Directions: upstream is holder to server (requests), downstream is server
// to holder (responses).
const (
	Upstream   Direction = "upstream"
	Downstream Direction = "downstream"
)

func (p *Proxy) add(kind string, dir Direction, attrs string) error {
	name := fmt.Sprintf("%s_%s", kind, dir)
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, kind, dir, attrs)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("add toxic %s: %w", name, err)
	}
	p.mu.Lock()
	p.toxics = append(p.toxics, name)
	p.mu.Unlock()
	return nil
}

// Blackhole silently drops every byte in both directions; connections stay
// open.
func (p *Proxy) Blackhole() error {
	if err := p.add("timeout", Upstream, `{"timeout":0}`); err != nil {
		return err
	}
	return p.add("timeout", Downstream, `{"timeout":0}`)
}

// LoseResponses lets requests through and drops every response: the server
// applies what it is asked, and the holder never hears about it.
func (p *Proxy) LoseResponses() error { return p.add("timeout", Downstream, `{"timeout":0}`) }

// Delay holds each chunk of traffic for d in each direction.
func (p *Proxy) Delay(d time.Duration) error {
	attrs := fmt.Sprintf(`{"latency":%d,"jitter":0}`, d.Milliseconds())
	if err := p.add("latency", Upstream, attrs); err != nil {
		return err
	}
	return p.add("latency", Downstream, attrs)
}

// Drop resets every connection and refuses new ones until Heal.
func (p *Proxy) Drop() error {
	p.p.Stop()
	return nil
}

// Heal removes every toxic and accepts connections again.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	names := p.toxics
	p.toxics = nil
	p.mu.Unlock()
	for _, n := range names {
		if err := p.p.Toxics.RemoveToxic(context.Background(), n); err != nil {
			return fmt.Errorf("remove toxic %s: %w", n, err)
		}
	}
	p.p.Lock()
	enabled := p.p.Enabled
	p.p.Unlock()
	if !enabled {
		return p.p.Start()
	}
	return nil
}
