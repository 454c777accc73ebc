package natstest

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// WithConfig configures the server with nats-server configuration text
// (accounts, exports and imports, users, authorization, a JetStream
// domain...), parsed again at every start. What this package sets itself
// (name, host, ports, store directory, logging, cluster, leaf nodes) is
// kept; users and tokens of WithUser, WithNKey and WithToken are replaced
// by the configuration's. Options after it apply after it.
//
//	natstest.Start(t, natstest.WithConfig(t, `accounts { A: { jetstream: enabled, users: [{user: a, password: a}] } }`))
func WithConfig(t testing.TB, text string) Option {
	t.Helper()
	if err := (&server.Options{}).ProcessConfigString(text); err != nil {
		t.Fatalf("natstest: server configuration: %v\n%s", err, text)
	}
	return WithOptions(func(o *server.Options) {
		parsed := &server.Options{}
		if err := parsed.ProcessConfigString(text); err != nil {
			panic(fmt.Sprintf("natstest: server configuration parsed once, not twice: %v", err))
		}
		keep := *o
		*o = *parsed
		o.ServerName, o.Host, o.Port, o.StoreDir = keep.ServerName, keep.Host, keep.Port, keep.StoreDir
		o.NoLog, o.NoSigs, o.JetStream = keep.NoLog, keep.NoSigs, keep.JetStream
		o.Cluster, o.Routes = keep.Cluster, keep.Routes
		o.LeafNode = keep.LeafNode
		if parsed.JetStreamDomain == "" {
			o.JetStreamDomain = keep.JetStreamDomain
		}
	})
}

// WithDomain gives the server's JetStream a domain.
func WithDomain(domain string) Option {
	return WithOptions(func(o *server.Options) { o.JetStreamDomain = domain })
}

// WithLeafNodes makes the server accept leaf node connections (without
// authentication) on a loopback port fixed at the first start. StartLeaf
// connects a leaf node to it.
func WithLeafNodes(t testing.TB) Option {
	t.Helper()
	port := reservePorts(t, 1)[0]
	return func(c *config) {
		c.leafPort = port
		c.tweaks = append(c.tweaks, func(o *server.Options) {
			o.LeafNode.Host = "127.0.0.1"
			o.LeafNode.Port = port
		})
	}
}

// LeafURL returns the URL leaf nodes connect to, or "" when the server
// does not accept them (see WithLeafNodes).
func (s *Server) LeafURL() string {
	if s.cfg.leafPort == 0 {
		return ""
	}
	return fmt.Sprintf("nats-leaf://127.0.0.1:%d", s.cfg.leafPort)
}

// StartLeaf starts a server that connects to hub as a leaf node (into
// hub's default account), and waits until the leaf connection is up. The
// leaf runs a JetStream of its own in domain "leaf"; clients of the leaf
// reach hub's JetStream through hub's domain (see WithDomain). opts apply
// to the leaf.
func StartLeaf(t testing.TB, hub *Server, opts ...Option) *Server {
	t.Helper()
	if hub.LeafURL() == "" {
		t.Fatalf("natstest: server %s does not accept leaf nodes (start it WithLeafNodes)", hub.Name())
	}
	remote, err := url.Parse(hub.LeafURL())
	if err != nil {
		t.Fatalf("natstest: leaf URL: %v", err)
	}
	base := WithOptions(func(o *server.Options) {
		o.JetStreamDomain = "leaf"
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}
	})
	s := newServer(t, hub.Name()+"-leaf", append([]Option{base}, opts...))
	t.Cleanup(s.Shutdown)
	s.start(t)
	deadline := time.Now().Add(readyTimeout)
	// Connected is not enough: requests to the hub's JetStream domain
	// (from the leaf's clients) have no responder until the hub's interest
	// in its domain's API has crossed the link.
	var api string
	if jsc := hub.NATS().JetStreamConfig(); jsc != nil && jsc.Domain != "" {
		api = "$JS." + jsc.Domain + ".API.INFO"
	}
	for s.NATS().NumLeafNodes() == 0 || hub.NATS().NumLeafNodes() == 0 ||
		api != "" && !s.NATS().GlobalAccount().SubscriptionInterest(api) {
		if time.Now().After(deadline) {
			t.Fatalf("natstest: leaf node %s not connected to %s within %v", s.Name(), hub.Name(), readyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}
