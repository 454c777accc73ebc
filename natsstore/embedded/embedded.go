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
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("embedded: invalid port %d", cfg.Port)
	}
	if cfg.ReadyTimeout < 0 {
		return nil, fmt.Errorf("embedded: negative ReadyTimeout %v", cfg.ReadyTimeout)
	}
	if cfg.SyncInterval < 0 && cfg.SyncInterval != SyncAlways {
		return nil, fmt.Errorf("embedded: SyncInterval %v: must be positive, 0 (the default) or SyncAlways", cfg.SyncInterval)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Server{dir: cfg.StoreDir}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "aster-nats-")
		if err != nil {
			return nil, fmt.Errorf("embedded: store directory: %w", err)
		}
		s.dir, s.tempDir = dir, true
	} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: store directory: %w", err)
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   s.dir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
	}
	if opts.ServerName == "" {
		opts.ServerName = "aster-embedded"
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	} else if err := portFree(opts.Host, opts.Port); err != nil {
		// nats-server would only log it, and never become ready.
		s.removeTemp()
		return nil, fmt.Errorf("embedded: cannot listen on %s: %w", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), err)
	}
	if cfg.SyncInterval == SyncAlways {
		opts.SyncAlways = true
	} else {
		opts.SyncInterval = cfg.SyncInterval
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

	wait := cfg.ReadyTimeout
	if wait == 0 {
		wait = DefaultReadyTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline))
	}
	if !ns.ReadyForConnections(wait) {
		_ = s.Close()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embedded: nats-server not ready: %w", err)
		}
		return nil, fmt.Errorf("embedded: nats-server not ready within %v (is %s:%d free?)", wait, opts.Host, cfg.Port)
	}
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		_ = s.Close()
		return nil, errors.New("embedded: nats-server has no client address")
	}
	s.url = "nats://" + net.JoinHostPort(opts.Host, strconv.Itoa(addr.Port))
	return s, nil
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
