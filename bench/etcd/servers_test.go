package peer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/natsstore/embedded"
)

// serverEnv names the server a test binary started in server mode runs.
const serverEnv = "ASTER_PEER_SERVER"

// Servers.
const (
	natsDefault = "nats"        // nats-server, JetStream's default sync_interval (2 min)
	natsSync    = "nats-sync"   // nats-server, sync_interval always
	etcdServer  = "etcd"        // etcd, defaults (fsync every commit)
	etcdNoSync  = "etcd-nosync" // etcd with --unsafe-no-fsync
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(serverEnv); kind != "" {
		if err := serve(kind); err != nil {
			fmt.Fprintln(os.Stderr, "server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	stopServers()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// serve runs one server until its standard input closes (the benchmark
// process ended), after printing "ready <url>".
func serve(kind string) error {
	dir, err := os.MkdirTemp("", "aster-peer-"+kind+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var url string
	var stop func()
	switch kind {
	case natsDefault, natsSync:
		cfg := embedded.Config{StoreDir: dir}
		if kind == natsSync {
			cfg.SyncInterval = embedded.SyncAlways
		}
		s, err := embedded.Start(context.Background(), cfg)
		if err != nil {
			return err
		}
		url, stop = s.ClientURL(), func() { _ = s.Close() }
	case etcdServer, etcdNoSync:
		e, u, err := startEtcd(dir, kind == etcdNoSync)
		if err != nil {
			return err
		}
		url, stop = u, e.Close
	default:
		return fmt.Errorf("unknown server %q", kind)
	}
	defer stop()
	fmt.Println("ready", url)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	return nil
}

// startEtcd starts a single-member etcd in dir, with its default fsync
// (or none, with noFsync: --unsafe-no-fsync), on loopback ports the kernel
// picks.
func startEtcd(dir string, noFsync bool) (*embed.Etcd, string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[0])}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[1])}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "fatal" // quiet, shutdown included
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = noFsync
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, "", errors.New("etcd did not become ready in 30 s")
	}
	return e, client.String(), nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// server is a server process started by this benchmark process.
type server struct {
	kind  string
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

var (
	serversMu sync.Mutex
	servers   = map[string]*server{}
)

// serverFor returns the server of kind, starting it on first use; it runs
// until the benchmark process ends.
func serverFor(b *testing.B, kind string) *server {
	b.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	if s := servers[kind]; s != nil {
		return s
	}
	s := startServer(b, kind)
	servers[kind] = s
	return s
}

// startServer starts a server process of kind; stop it with stop.
func startServer(b *testing.B, kind string) *server {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+kind)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("server %s did not start: %q %v", kind, line, err)
	}
	return &server{kind: kind, url: url, cmd: cmd, stdin: stdin}
}

// stop ends the server process: it exits when its standard input closes.
func (s *server) stop() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func stopServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for kind, s := range servers {
		s.stop()
		delete(servers, kind)
	}
}

// cpu returns the CPU time (user and system) process pid has used, from
// /proc (clock ticks of 10 ms).
func cpu(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces), from field 3.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// rss returns the resident memory of process pid, in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
