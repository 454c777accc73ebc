package natsstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/lease"
)

// Dial connects to NATS as d says and opens a Store over the connection,
// which the store owns: Close closes it.
//
// The connection fails fast while disconnected: nothing is buffered, so an
// operation attempted while the server is away returns lease.ErrUnavailable
// at once and never lands later. It reconnects forever, and watches are
// re-created after every reconnect. Authentication failures match
// ErrAuthentication; a user without the permissions the store needs gets
// ErrPermission.
func Dial(ctx context.Context, d DialOptions, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts, err := d.natsOptions(cfg.logger())
	if err != nil {
		return nil, err
	}
	urls := strings.Join(d.URLs, ",")
	if urls == "" {
		urls = nats.DefaultURL
	}
	nc, err := connect(ctx, urls, opts)
	if err != nil {
		if isAuthFailure(err) {
			return nil, fmt.Errorf("%w: connect to %s: %w (check the user and password, token, nkey or credentials file)",
				ErrAuthentication, urls, err)
		}
		return nil, fmt.Errorf("natsstore: connect to %s: %w: %w", urls, lease.ErrUnavailable, err)
	}
	js, err := newJetStream(nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := open(ctx, js, cfg, true)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// connect runs nats.Connect, which takes no context, so that a done ctx
// returns at once; a connection made after that is closed.
func connect(ctx context.Context, urls string, opts []nats.Option) (*nats.Conn, error) {
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(urls, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		return r.nc, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// natsOptions translates d into nats.go options.
func (d DialOptions) natsOptions(log *slog.Logger) ([]nats.Option, error) {
	bad := func(field, format string, args ...any) error {
		return &lease.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if d.ReconnectWait < 0 {
		return nil, bad("ReconnectWait", "must not be negative, got %v", d.ReconnectWait)
	}
	if d.ConnectTimeout < 0 {
		return nil, bad("ConnectTimeout", "must not be negative, got %v", d.ConnectTimeout)
	}
	methods := 0
	for _, set := range []bool{d.CredentialsFile != "", d.NKeySeedFile != "", d.User != "" || d.Password != "", d.Token != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return nil, bad("CredentialsFile", "set one of CredentialsFile, NKeySeedFile, User/Password and Token")
	}
	if (d.CertFile == "") != (d.KeyFile == "") {
		return nil, bad("CertFile", "CertFile and KeyFile go together")
	}
	wait := d.ReconnectWait
	if wait == 0 {
		wait = DefaultReconnectWait
	}
	timeout := d.ConnectTimeout
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	opts := []nats.Option{
		nats.ReconnectBufSize(-1), // fail fast: nothing is replayed after a reconnect
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.Timeout(timeout),
		// nats.go's default handler writes to stderr; a library is quiet.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("natsstore: asynchronous NATS error", "err", err, "subject", subject)
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil || nc.IsClosed() {
				return // our own Close, not a lost connection
			}
			log.Warn("natsstore: disconnected from NATS", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("natsstore: reconnected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
	}
	if d.Name != "" {
		opts = append(opts, nats.Name(d.Name))
	}
	switch {
	case d.CredentialsFile != "":
		opts = append(opts, nats.UserCredentials(d.CredentialsFile))
	case d.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(d.NKeySeedFile)
		if err != nil {
			return nil, bad("NKeySeedFile", "%v", err)
		}
		opts = append(opts, o)
	case d.User != "" || d.Password != "":
		opts = append(opts, nats.UserInfo(d.User, d.Password))
	case d.Token != "":
		opts = append(opts, nats.Token(d.Token))
	}
	if d.TLS != nil {
		opts = append(opts, nats.Secure(d.TLS.Clone()))
	} else if d.CAFile != "" || d.CertFile != "" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if d.CAFile != "" {
		opts = append(opts, nats.RootCAs(d.CAFile))
	}
	if d.CertFile != "" {
		opts = append(opts, nats.ClientCert(d.CertFile, d.KeyFile))
	}
	return opts, nil
}
