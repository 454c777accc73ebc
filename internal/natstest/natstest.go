// Package natstest starts in-process nats-server instances with JetStream
// for tests: a single node, or a cluster of several nodes in one process.
//
// Every server listens on loopback only, on a port chosen by the kernel, keeps
// its JetStream store in a t.TempDir(), logs nothing, and is shut down by
// t.Cleanup. A server can be stopped and restarted on the same port with the
// same store, so that clients reconnect to it and find their data again.
//
//	srv := natstest.Start(t)
//	nc, err := nats.Connect(srv.ClientURL())
//
//	c := natstest.StartCluster(t, 3)
//	nc, err := nats.Connect(c.ClientURL())
//
// Authentication is configured with options:
//
//	natstest.Start(t, natstest.WithUser("alice", "secret"))
//	natstest.Start(t, natstest.WithNKey(publicKey))
//	natstest.Start(t, natstest.WithOptions(func(o *server.Options) { ... }))
//
// Secured deployments: an Operator issues JWT accounts and .creds files
// (operator mode); WithConfig takes nats-server configuration text
// (accounts, exports, imports); WithLeafNodes and StartLeaf connect a leaf
// node to a hub; a PKI issues certificates for TLS and mutual TLS; a Proxy
// freezes the traffic of its connections.
// Permissions lists the least-privilege permissions of a natsstore service
// for each Topology (examples/permissions prints them).
package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a cluster may take to become ready, and a
// leaf node to connect. A meta group whose election fails (votes answered
// late on a loaded machine) waits nats-server's election timeout, 4 to 9 s
// and not settable outside its package, before the next round: the bound
// covers three rounds, and WaitReady says every 5 s that it still waits.
const readyTimeout = 30 * time.Second

// startTimeout bounds how long a server may take to accept connections.
// nats-server enables JetStream before it listens; a cluster's server
// started while make test runs race-enabled packages side by side on two
// cores was seen to need more than 10 s (2 in 160 loaded runs, and once in
// a clean-clone make test), for a reason not found yet.
const startTimeout = 30 * time.Second

// Option configures a test server.
type Option func(*config)

type config struct {
	users  []*server.User
	nkeys  []*server.NkeyUser
	token  string
	noJS   bool
	tweaks []func(*server.Options)
	// leafPort is the leaf node port (WithLeafNodes); 0 when none.
	leafPort int
}

// WithUser requires clients to authenticate; user/password is one allowed
// identity, with every permission. Repeat the option for more users.
func WithUser(user, password string) Option {
	return func(c *config) { c.users = append(c.users, &server.User{Username: user, Password: password}) }
}

// WithRestrictedUser adds a user that may publish only to the subjects in
// publish and subscribe only to those in subscribe (wildcards allowed).
// Reply subjects of requests ("_INBOX.>") are not added implicitly.
func WithRestrictedUser(user, password string, publish, subscribe []string) Option {
	return func(c *config) {
		c.users = append(c.users, &server.User{
			Username: user,
			Password: password,
			Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: publish},
				Subscribe: &server.SubjectPermission{Allow: subscribe},
			},
		})
	}
}

// WithNKey requires clients to authenticate; the holder of the seed of
// publicKey (a user nkey, "U...") is one allowed identity, with every
// permission. Repeat the option for more keys.
func WithNKey(publicKey string) Option {
	return func(c *config) { c.nkeys = append(c.nkeys, &server.NkeyUser{Nkey: publicKey}) }
}

// WithToken requires clients to present token. It cannot be combined with
// users or nkeys (a nats-server rule).
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithoutJetStream starts a server without JetStream.
func WithoutJetStream() Option { return func(c *config) { c.noJS = true } }

// WithOptions lets fn change the server options after every other option
// has been applied, for what the other options do not cover. fn runs again
// on every (re)start; it must not change Host, Port or StoreDir.
func WithOptions(fn func(*server.Options)) Option {
	return func(c *config) { c.tweaks = append(c.tweaks, fn) }
}

// Server is one in-process nats-server. Its methods are safe for concurrent
// use.
type Server struct {
	name     string
	storeDir string
	cfg      config

	mu          sync.Mutex
	srv         *server.Server
	port        int // client port, fixed at the first start
	clusterName string
	clusterPort int // route port, fixed at the first start; 0 when not clustered
	routes      []*url.URL
}

// Start starts a single server with JetStream and registers its shutdown
// with t.Cleanup. It fails the test if the server does not start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := newServer(t, "natstest", opts)
	t.Cleanup(s.Shutdown) // after t.TempDir: runs before the directory is removed
	s.start(t)
	return s
}

func newServer(t testing.TB, name string, opts []Option) *Server {
	s := &Server{name: name, storeDir: t.TempDir(), port: reservePorts(t, 1)[0]}
	for _, o := range opts {
		o(&s.cfg)
	}
	return s
}

// options builds the server options for the next start. s.mu must be held.
func (s *Server) options() *server.Options {
	o := &server.Options{
		ServerName:    s.name,
		Host:          "127.0.0.1",
		Port:          s.port,
		JetStream:     !s.cfg.noJS,
		StoreDir:      s.storeDir,
		NoLog:         true,
		NoSigs:        true,
		Users:         cloneUsers(s.cfg.users),
		Nkeys:         cloneNkeys(s.cfg.nkeys),
		Authorization: s.cfg.token,
	}
	if s.clusterName != "" {
		o.Cluster = server.ClusterOpts{
			Name: s.clusterName,
			Host: "127.0.0.1",
			Port: s.clusterPort,
		}
		o.Routes = s.routes
	}
	for _, fn := range s.cfg.tweaks {
		fn(o)
	}
	return o
}

// start starts the server; it must not be running.
func (s *Server) start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, err := server.NewServer(s.options())
	if err != nil {
		t.Fatalf("natstest: configure server %s: %v", s.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(startTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		t.Fatalf("natstest: server %s not ready within %v", s.name, startTimeout)
	}
	s.srv = srv
	if addr, ok := srv.Addr().(*net.TCPAddr); ok {
		s.port = addr.Port
	}
	if s.clusterName != "" {
		if addr := srv.ClusterAddr(); addr != nil {
			s.clusterPort = addr.Port
		}
	}
}

// ClientURL returns the server's client URL, nats://127.0.0.1:port. It stays
// the same across restarts.
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("nats://127.0.0.1:%d", s.port)
}

// StoreDir returns the JetStream store directory; it survives restarts and
// is removed when the test ends.
func (s *Server) StoreDir() string { return s.storeDir }

// Name returns the server name, which is unique within a cluster.
func (s *Server) Name() string { return s.name }

// NATS returns the running nats-server, or nil while the server is shut
// down. It changes on every restart.
func (s *Server) NATS() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Running reports whether the server is running.
func (s *Server) Running() bool { return s.NATS() != nil }

// Shutdown stops the server gracefully and waits until it has stopped. It is
// idempotent; a later Restart starts it again.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart shuts the server down if it is running, then starts it again on
// the same port with the same store directory, so that connected clients
// reconnect and JetStream data (streams, KV buckets, revisions) survives.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	s.start(t)
}

// Cluster is a JetStream cluster of in-process servers that talk over
// loopback routes.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts n servers (n >= 1) in one JetStream cluster, waits
// until the cluster has elected a meta leader and every server is current,
// and registers the shutdown of every server with t.Cleanup. opts apply to every server.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: a cluster needs at least one server, got %d", n)
	}
	name := fmt.Sprintf("natstest-%d", clusterSeq.Add(1))
	c := &Cluster{}
	// A JetStream cluster needs its routes configured before it starts, so
	// the route ports are reserved first: the kernel picks free ones, and
	// they are released just before the servers bind them. Every server
	// routes to all of them (a route to itself is ignored), so that any
	// server can be restarted alone.
	ports := reservePorts(t, n)
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	for i := range n {
		s := newServer(t, fmt.Sprintf("%s-n%d", name, i+1), opts)
		s.clusterName = name
		s.clusterPort = ports[i]
		s.routes = routes
		// Registered after t.TempDir (in newServer), so that it runs
		// before the store directory is removed.
		t.Cleanup(s.Shutdown)
		s.start(t)
		c.Servers = append(c.Servers, s)
	}
	c.WaitReady(t)
	return c
}

// ClientURL returns the client URLs of every server, comma-separated, as
// nats.Connect accepts them.
func (c *Cluster) ClientURL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Shutdown stops every server. It is idempotent.
func (c *Cluster) Shutdown() {
	for _, s := range c.Servers {
		s.Shutdown()
	}
}

// WaitReady waits until the running servers have a JetStream meta leader
// that counts every running server as an online peer (so that replicated
// streams can be placed), and all of them are current. It fails the test
// after readyTimeout.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	start := time.Now()
	deadline, progress := start.Add(readyTimeout), start.Add(5*time.Second)
	for {
		peers, current, running := 0, true, 0
		for _, s := range c.Servers {
			srv := s.NATS()
			if srv == nil {
				continue
			}
			running++
			if srv.JetStreamIsLeader() {
				peers = len(srv.JetStreamClusterPeers())
			}
			current = current && srv.JetStreamIsCurrent()
		}
		if running > 0 && peers >= running && current {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster not ready within %v (%d of %d servers are online peers of a leader, all current %v)",
				readyTimeout, peers, running, current)
		}
		if time.Now().After(progress) {
			t.Logf("natstest: cluster not ready after %v (%d of %d servers are online peers of a leader); waiting up to %v",
				time.Since(start).Round(time.Second), peers, running, readyTimeout)
			progress = progress.Add(5 * time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StreamLeader returns the server that leads stream in account ("$G" is
// the default account), or nil when no running server does.
func (c *Cluster) StreamLeader(account, stream string) *Server {
	for _, s := range c.Servers {
		if srv := s.NATS(); srv != nil && srv.JetStreamIsStreamLeader(account, stream) {
			return s
		}
	}
	return nil
}

// reservePorts returns n distinct free loopback TCP ports, for servers that
// bind them later and again on every restart.
//
// They are drawn below the kernel's ephemeral range (32768 and up on
// Linux, 49152 and up elsewhere), from which a bind to port 0 and every
// outgoing connection take their ports: under load, with test processes
// running side by side, a port the kernel picked and released was seen
// taken by another socket before its server bound it (a server "not ready
// within 10s"). Here only another reservePorts, in the instant between its
// check and its server's bind, could take it.
func reservePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("natstest: no free loopback port in [%d, %d) after %d tries", portLow, portHigh, tries)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(portLow+rand.IntN(portHigh-portLow))))
		if err != nil {
			continue // taken
		}
		defer l.Close() // held until all are drawn, so that they are distinct
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// The range reservePorts draws from.
const portLow, portHigh = 10000, 32000

// clusterSeq numbers clusters so that their names are unique in a process.
var clusterSeq atomic.Int64

func cloneUsers(us []*server.User) []*server.User {
	out := make([]*server.User, 0, len(us))
	for _, u := range us {
		c := *u
		out = append(out, &c)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func cloneNkeys(ks []*server.NkeyUser) []*server.NkeyUser {
	out := make([]*server.NkeyUser, 0, len(ks))
	for _, k := range ks {
		c := *k
		out = append(out, &c)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
