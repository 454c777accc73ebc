// Package embedded runs a nats-server with JetStream inside the process, for
// demos, examples, tests and single-process deployments that have no NATS
// server of their own.
//
// It lives apart from package natsstore so that a program that connects to
// an external server does not compile nats-server:
//
//	srv, err := embedded.Start(ctx, embedded.Config{StoreDir: "/var/lib/app/nats"})
//	if err != nil { ... }
//	defer srv.Close()
//	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
//
// The server listens on loopback only unless Config.Host says otherwise. With
// a StoreDir, leases and revisions survive a restart of the process; without
// one, the server keeps its data in a temporary directory that Close removes.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultReadyTimeout bounds how long Start waits for the server.
const DefaultReadyTimeout = 10 * time.Second

// Config configures an embedded server. The zero value starts a server on a
// free loopback port with a temporary store.
type Config struct {
	// StoreDir is the JetStream store directory; it is created if missing.
	// "" means a new temporary directory, removed by Close.
	StoreDir string
	// Host is the address to listen on. "" means 127.0.0.1: only this
	// machine can connect.
	Host string
	// Port is the client port. 0 means a free port chosen by the kernel.
	Port int
	// ServerName names the server. "" means "aster-embedded".
	ServerName string
	// ReadyTimeout bounds Start. 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Logger receives the server's notices, warnings and errors. nil
	// discards them.
	Logger *slog.Logger
	// SyncInterval is how often JetStream flushes its files to disk (the
	// server's sync_interval). 0 keeps the server's default, 2 minutes: a
	// machine that fails (not just the process) can lose writes the
	// server acknowledged since the last flush, and fencing tokens with
	// them. SyncAlways flushes every write before acknowledging it, at the
	// cost docs/nats.md measures.
	SyncInterval time.Duration
}

// SyncAlways, as Config.SyncInterval, makes the server flush every write to
// disk before it acknowledges it (sync_interval: always).
const SyncAlways time.Duration = -1

// Server is a running embedded nats-server.
type Server struct {
	ns      *server.Server
	url     string
	dir     string
	tempDir bool
	once    sync.Once
	err     error
}

// Start starts the server and waits until it accepts connections. ctx
// bounds the wait. A port in use fails at once (with an error matching
// syscall.EADDRINUSE).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	// 1. Check the configuration.
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// 2. Make the store directory.
	s, err := withStoreDir(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	// 3. Configure the server and start it.
	opts, err := serverOptions(cfg, s.dir)
	if err != nil {
		s.removeTemp()
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		s.removeTemp()
		return nil, fmt.Errorf("embedded: configure nats-server: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLoggerV2(slogLogger{cfg.Logger}, false, false, false)
	}
	s.ns = ns
	ns.Start()
	// 4. Wait until it accepts connections.
	if err := s.ready(ctx, cfg, opts.Host); err != nil {
		return nil, err
	}
	return s, nil
}

// check reports the first field of cfg that cannot work.
func (cfg Config) check() error {
	switch {
	case cfg.Port < 0 || cfg.Port > 65535:
		return fmt.Errorf("embedded: invalid port %d", cfg.Port)
	case cfg.ReadyTimeout < 0:
		return fmt.Errorf("embedded: negative ReadyTimeout %v", cfg.ReadyTimeout)
	case cfg.SyncInterval < 0 && cfg.SyncInterval != SyncAlways:
		return fmt.Errorf("embedded: SyncInterval %v: must be positive, 0 (the default) or SyncAlways", cfg.SyncInterval)
	}
	return nil
}

// withStoreDir returns a Server whose store directory exists: dir, created
// if missing, or a new temporary directory when dir is "".
func withStoreDir(dir string) (*Server, error) {
	s := &Server{dir: dir}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "aster-nats-")
		if err != nil {
			return nil, fmt.Errorf("embedded: store directory: %w", err)
		}
		s.dir, s.tempDir = dir, true
	} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: store directory: %w", err)
	}
	return s, nil
}

// serverOptions returns the options of a server for cfg with its store in
// dir. A port cfg names must be free.
func serverOptions(cfg Config, dir string) (*server.Options, error) {
	opts := &server.Options{
		ServerName: cmp.Or(cfg.ServerName, "aster-embedded"),
		Host:       cmp.Or(cfg.Host, "127.0.0.1"),
		Port:       cmp.Or(cfg.Port, server.RANDOM_PORT),
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		SyncAlways: cfg.SyncInterval == SyncAlways,
	}
	if !opts.SyncAlways {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.Port != 0 {
		if err := portFree(opts.Host, opts.Port); err != nil {
			// nats-server would only log it, and never become ready.
			return nil, fmt.Errorf("embedded: cannot listen on %s: %w", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), err)
		}
	}
	return opts, nil
}

// ready waits until the started server, listening on host, accepts
// connections, within cfg.ReadyTimeout and ctx's deadline, and takes its
// URL. A server that is not ready is closed.
func (s *Server) ready(ctx context.Context, cfg Config, host string) error {
	wait := cfg.ReadyTimeout
	if wait == 0 {
		wait = DefaultReadyTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline))
	}
	if !s.ns.ReadyForConnections(wait) {
		_ = s.Close()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("embedded: nats-server not ready: %w", err)
		}
		return fmt.Errorf("embedded: nats-server not ready within %v (is %s:%d free?)", wait, host, cfg.Port)
	}
	addr, ok := s.ns.Addr().(*net.TCPAddr)
	if !ok {
		_ = s.Close()
		return errors.New("embedded: nats-server has no client address")
	}
	s.url = "nats://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
	return nil
}

// portFree reports an error when host:port cannot be listened on (it is in
// use, or not an address of this machine).
func portFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// ClientURL returns the URL clients connect to, such as
// nats://127.0.0.1:4222.
func (s *Server) ClientURL() string { return s.url }

// StoreDir returns the JetStream store directory.
func (s *Server) StoreDir() string { return s.dir }

// NATS returns the nats-server itself, for monitoring or in-process
// connections (nats.InProcessServer).
func (s *Server) NATS() *server.Server { return s.ns }

// Close shuts the server down, waits for it to stop, and removes the store
// directory if Start made a temporary one. It is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		if s.ns != nil {
			s.ns.Shutdown()
			s.ns.WaitForShutdown()
		}
		s.err = s.removeTemp()
	})
	return s.err
}

func (s *Server) removeTemp() error {
	if !s.tempDir {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("embedded: remove temporary store: %w", err)
	}
	return nil
}

// slogLogger passes nats-server's log to a *slog.Logger.
type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l slogLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l slogLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l slogLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l slogLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l slogLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
