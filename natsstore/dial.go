package natsstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/natscreds"
	"github.com/asterforge/aster/lease"
)

// Dial connects to NATS as d says and opens a Store that owns the connection
// (Close closes it). Operations fail fast while disconnected and never land
// later; the connection reconnects forever, re-reading its credentials file.
// Errors: a *lease.FieldError (lease.ErrInvalid) for a configuration that
// cannot work, ErrAuthentication, ErrPermission, or lease.ErrUnavailable for
// a server that cannot be reached (retried until ctx ends with
// d.RetryConnect). See docs/nats.md, "Connecting".
func Dial(ctx context.Context, d DialOptions, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	state := newConnState(cfg)
	opts, err := d.natsOptions(state)
	if err != nil {
		return nil, err
	}
	urls := strings.Join(d.URLs, ",")
	if urls == "" {
		urls = nats.DefaultURL
	}
	nc, err := connectRetrying(ctx, d, urls, opts, state)
	if err != nil {
		return nil, err
	}
	cfg.conn = state
	js, err := newJetStream(nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := open(ctx, js, cfg, true)
	if err != nil {
		nc.Close()
		return nil, openError(cfg, err)
	}
	return s, nil
}

// connectRetrying makes the first connection: once, or with d.RetryConnect
// until it succeeds, fails for a reason retrying cannot fix, or ctx ends.
func connectRetrying(ctx context.Context, d DialOptions, urls string, opts []nats.Option, state *connState) (*nats.Conn, error) {
	wait := d.reconnectWait()
	policy := backoff.Policy{Base: wait, Cap: max(wait, DefaultRetryConnectCap), Jitter: backoff.Equal}
	var last error // the last attempt's error, classified
	for attempt := 0; ; attempt++ {
		state.certRequested.Store(false)
		nc, err := connect(ctx, urls, opts)
		if err == nil {
			state.connected(nc)
			return nc, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			if last == nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("%w: %w (gave up after %d attempts to connect)", last, cerr, attempt)
		}
		err = connectError(urls, state.certRequested.Load(), err)
		if !d.RetryConnect || errors.Is(err, lease.ErrInvalid) {
			return nil, err
		}
		last = err
		pause := policy.Delay(attempt, nil)
		state.log.Warn("natsstore: cannot connect to NATS yet; retrying", "err", err, "attempt", attempt+1, "pause", pause)
		if !sleep(ctx, pause) {
			return nil, fmt.Errorf("%w: %w (gave up after %d attempts to connect)", err, ctx.Err(), attempt+1)
		}
	}
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

func (d DialOptions) reconnectWait() time.Duration {
	if d.ReconnectWait == 0 {
		return DefaultReconnectWait
	}
	return d.ReconnectWait
}

// natsOptions translates d into nats.go options. Every file named in d is
// read now, so that a missing or malformed one is a *lease.FieldError at
// once, and again at every connection attempt (by nats.go's callbacks), so
// that a replaced one is used from the next reconnect on.
func (d DialOptions) natsOptions(state *connState) ([]nats.Option, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	opts := d.connOptions(state)
	auth, err := d.authOption()
	if err != nil {
		return nil, err
	}
	if auth != nil {
		opts = append(opts, auth)
	}
	o, err := d.tlsOption(state)
	if err != nil {
		return nil, err
	}
	return append(opts, o), nil
}

// check reports the first field of d that cannot work, as a
// *lease.FieldError; the files d names are checked when they are read.
func (d DialOptions) check() error {
	p := d.InboxPrefix
	return firstBroken(
		fieldRule{d.ReconnectWait < 0, "ReconnectWait",
			"must not be negative, got %v", []any{d.ReconnectWait}},
		fieldRule{d.ConnectTimeout < 0, "ConnectTimeout",
			"must not be negative, got %v", []any{d.ConnectTimeout}},
		fieldRule{d.authMethods() > 1, "CredentialsFile",
			"set one of CredentialsFile, NKeySeedFile, User/Password and Token", nil},
		fieldRule{(d.CertFile == "") != (d.KeyFile == ""), "CertFile",
			"CertFile and KeyFile go together", nil},
		fieldRule{p != "" && (strings.ContainsAny(p, "*> \t") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".")),
			"InboxPrefix", "%q is not a subject prefix (no wildcards, spaces or leading or trailing dots)", []any{p}},
	)
}

// authMethods returns how many ways to authenticate d sets.
func (d DialOptions) authMethods() int {
	methods := 0
	for _, set := range []bool{d.CredentialsFile != "", d.NKeySeedFile != "", d.User != "" || d.Password != "", d.Token != ""} {
		if set {
			methods++
		}
	}
	return methods
}

// connOptions returns the options of the connection itself: it fails fast
// while disconnected, reconnects forever and is quiet.
func (d DialOptions) connOptions(state *connState) []nats.Option {
	timeout := d.ConnectTimeout
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	log := state.log
	opts := []nats.Option{
		nats.ReconnectBufSize(-1), // fail fast: nothing is replayed after a reconnect
		nats.MaxReconnects(-1),
		nats.ReconnectWait(d.reconnectWait()),
		nats.Timeout(timeout),
		// nats.go stops reconnecting after the same refusal of the
		// credentials twice in a row; keep trying, re-reading the
		// credentials file, so that a rotated file is picked up.
		nats.IgnoreAuthErrorAbort(),
		// nats.go's default handler writes to stderr; a library is quiet.
		nats.ErrorHandler(state.asyncError),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil || nc.IsClosed() {
				return // our own Close, not a lost connection
			}
			log.Warn("natsstore: disconnected from NATS", "err", err)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("natsstore: reconnect attempt failed", "err", err)
		}),
		nats.ReconnectHandler(state.reconnected),
	}
	if d.Name != "" {
		opts = append(opts, nats.Name(d.Name))
	}
	if d.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(d.InboxPrefix))
	}
	return opts
}

// authOption returns the option of the way to authenticate that d sets
// (check allows one), nil when it sets none.
func (d DialOptions) authOption() (nats.Option, error) {
	switch {
	case d.CredentialsFile != "":
		if err := natscreds.Check(d.CredentialsFile); err != nil {
			return nil, fieldErrorf("CredentialsFile", "%v", err)
		}
		return nats.UserCredentials(d.CredentialsFile), nil // read at every connect
	case d.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(d.NKeySeedFile)
		if err != nil {
			return nil, fieldErrorf("NKeySeedFile", "%v", err)
		}
		return o, nil
	case d.User != "" || d.Password != "":
		return nats.UserInfo(d.User, d.Password), nil
	case d.Token != "":
		return nats.Token(d.Token), nil
	}
	return nil, nil
}

// tlsOption returns the option that configures TLS. The configuration is
// always set, so that a server that requires TLS gets it even when d names
// none; the connection requires TLS only when d configures it. When no
// client certificate is configured, a server that asks for one is noted, so
// that a refused connection can say what is missing.
func (d DialOptions) tlsOption(state *connState) (nats.Option, error) {
	bad := func(field, format string, args ...any) error {
		return &lease.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.TLS != nil {
		cfg = d.TLS.Clone()
	}
	secure := d.TLS != nil || d.CAFile != "" || d.CertFile != ""

	var rootCAs func() (*x509.CertPool, error)
	if d.CAFile != "" {
		base := cfg.RootCAs
		rootCAs = func() (*x509.CertPool, error) {
			pool := x509.NewCertPool()
			if base != nil {
				pool = base.Clone()
			}
			pem, err := os.ReadFile(d.CAFile)
			if err != nil {
				return nil, err
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: no PEM certificate in it", d.CAFile)
			}
			return pool, nil
		}
		if _, err := rootCAs(); err != nil {
			return nil, bad("CAFile", "%v", err)
		}
	}

	var clientCert func() (tls.Certificate, error)
	if d.CertFile != "" {
		clientCert = func() (tls.Certificate, error) {
			return tls.LoadX509KeyPair(d.CertFile, d.KeyFile)
		}
		if _, err := clientCert(); err != nil {
			return nil, bad("CertFile", "client certificate %s and key %s: %v", d.CertFile, d.KeyFile, err)
		}
	} else if len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			state.certRequested.Store(true)
			return &tls.Certificate{}, nil // none: the server decides
		}
	}

	return func(o *nats.Options) error {
		o.TLSConfig = cfg
		o.Secure = o.Secure || secure
		o.RootCAsCB = rootCAs
		o.TLSCertCB = clientCert
		return nil
	}, nil
}
