package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/internal/natscreds"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// connFlags are the nats CLI's connection flags.
type connFlags struct {
	server, user, password, token, creds, nkey string
	cert, key, ca                              string
	domain                                     string
	timeout                                    time.Duration
}

// defaults reads the nats CLI's environment variables.
func (f *connFlags) defaults(getenv func(string) string) {
	f.server = or(getenv("NATS_URL"), nats.DefaultURL)
	f.user, f.password, f.token = getenv("NATS_USER"), getenv("NATS_PASSWORD"), getenv("NATS_TOKEN")
	f.creds, f.nkey = getenv("NATS_CREDS"), getenv("NATS_NKEY")
	f.cert, f.key, f.ca = getenv("NATS_CERT"), getenv("NATS_KEY"), getenv("NATS_CA")
	f.domain = getenv("NATS_JSDOMAIN")
	f.timeout = 5 * time.Second
	if d, err := time.ParseDuration(getenv("NATS_TIMEOUT")); err == nil && d > 0 {
		f.timeout = d
	}
}

// register adds the flags to fs, with the current values as defaults.
func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", f.server, "NATS server `URLs`, comma-separated (NATS_URL)")
	fs.StringVar(&f.server, "s", f.server, "short for --server")
	fs.StringVar(&f.user, "user", f.user, "user name (NATS_USER)")
	fs.StringVar(&f.password, "password", f.password, "password (NATS_PASSWORD)")
	fs.StringVar(&f.token, "token", f.token, "authentication token (NATS_TOKEN)")
	fs.StringVar(&f.creds, "creds", f.creds, "user credentials `file` (NATS_CREDS)")
	fs.StringVar(&f.nkey, "nkey", f.nkey, "user nkey seed `file` (NATS_NKEY)")
	fs.StringVar(&f.cert, "tlscert", f.cert, "TLS client certificate `file` (NATS_CERT)")
	fs.StringVar(&f.key, "tlskey", f.key, "TLS client key `file` (NATS_KEY)")
	fs.StringVar(&f.ca, "tlsca", f.ca, "TLS certificate authority `file` (NATS_CA)")
	fs.StringVar(&f.domain, "js-domain", f.domain, "JetStream `domain` (NATS_JSDOMAIN)")
	fs.DurationVar(&f.timeout, "timeout", f.timeout, "bound on each request to NATS (NATS_TIMEOUT)")
}

// connect connects to NATS. Every file a flag names is read first, so that
// a missing or malformed one is reported with its flag.
func (f *connFlags) connect(ctx context.Context) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("aster"),
		nats.Timeout(f.timeout),
		nats.ReconnectBufSize(-1), // fail fast while disconnected
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), // errors surface where they matter
	}
	methods := 0
	for _, set := range []bool{f.creds != "", f.nkey != "", f.user != "" || f.password != "", f.token != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return nil, &usageError{"set one of --creds, --nkey, --user/--password and --token"}
	}
	switch {
	case f.creds != "":
		if err := natscreds.Check(f.creds); err != nil {
			return nil, fmt.Errorf("--creds (NATS_CREDS): %w", err)
		}
		opts = append(opts, nats.UserCredentials(f.creds))
	case f.nkey != "":
		o, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey (NATS_NKEY): %w", err)
		}
		opts = append(opts, o)
	case f.user != "" || f.password != "":
		opts = append(opts, nats.UserInfo(f.user, f.password))
	case f.token != "":
		opts = append(opts, nats.Token(f.token))
	}
	if (f.cert == "") != (f.key == "") {
		return nil, &usageError{"--tlscert and --tlskey go together"}
	}
	var certRequested atomic.Bool
	o, err := f.tlsOption(&certRequested)
	if err != nil {
		return nil, err
	}
	opts = append(opts, o)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(f.server, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, f.explain(r.err, certRequested.Load())
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// tlsOption returns the option that configures TLS. The configuration is
// set even without TLS flags, for a server that requires TLS; the
// connection requires TLS only when --tlsca or --tlscert is given. When the
// server asks for a client certificate, certRequested is set: a server that
// requires one and gets none refuses the connection in ways that do not
// say why (with TLS 1.3, a broken pipe or an EOF after the handshake). The
// certificate of --tlscert is sent whenever the server asks, even if it
// names other CAs, so that a refusal is the server's and says so.
func (f *connFlags) tlsOption(certRequested *atomic.Bool) (nats.Option, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--tlsca (NATS_CA): %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tlsca (NATS_CA): %s: no PEM certificate in it", f.ca)
		}
	}
	var cert *tls.Certificate
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--tlscert and --tlskey (NATS_CERT, NATS_KEY): %w", err)
		}
		cert = &c
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		certRequested.Store(true)
		if cert == nil {
			return &tls.Certificate{}, nil // none: the server decides
		}
		return cert, nil
	}
	secure := f.ca != "" || f.cert != ""
	return func(o *nats.Options) error {
		o.TLSConfig = cfg
		o.Secure = o.Secure || secure
		return nil
	}, nil
}

// explain says what a connection error means. certRequested reports that
// the server asked for a client certificate.
func (f *connFlags) explain(err error, certRequested bool) error {
	msg := strings.ToLower(err.Error())
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(msg, "authorization"), strings.Contains(msg, "authentication"):
		return fmt.Errorf("connect to %s: the server refused the credentials: %w (check --creds, --nkey, --user/--password or --token)",
			f.servers(), err)
	case certRequested && f.cert == "":
		return fmt.Errorf("connect to %s: the server requires a client certificate (mutual TLS) and none was given: "+
			"pass one with --tlscert and --tlskey (NATS_CERT, NATS_KEY) (connecting failed with: %w)", f.servers(), err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("connect to %s: the server's certificate is not signed by a CA this client trusts: "+
			"pass the CA that signed it with --tlsca (NATS_CA) (%w)", f.servers(), err)
	case errors.As(err, &hostname):
		return fmt.Errorf("connect to %s: the server's certificate is not valid for the host connected to: "+
			"connect with a name the certificate holds (%w)", f.servers(), err)
	case errors.As(err, &invalid):
		return fmt.Errorf("connect to %s: the server's certificate is not valid (%w)", f.servers(), err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("connect to %s: the server does not offer TLS, and --tlsca or --tlscert (NATS_CA, NATS_CERT) "+
			"asks for it: drop them, or connect to a server with TLS (%w)", f.servers(), err)
	case certRequested:
		// The certificate went out; the server closed the connection.
		return fmt.Errorf("connect to %s: the server did not accept the client certificate of --tlscert (NATS_CERT): "+
			"is it signed by a CA the server trusts, and still valid? (connecting failed with: %w)", f.servers(), err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("connect to %s: %w (is a NATS server running there? For development, start one with: aster dev)",
			f.servers(), err)
	default:
		return fmt.Errorf("connect to %s: %w", f.servers(), err)
	}
}

// servers returns --server for messages, with the password or token of
// any URL replaced by "xxxxx".
func (f *connFlags) servers() string { return redact(f.server) }

// redact replaces the password or token in each of the comma-separated
// NATS URLs of s by "xxxxx" (a URL with a user and no password carries a
// token).
func redact(s string) string {
	urls := strings.Split(s, ",")
	for i, raw := range urls {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			if err != nil && strings.Contains(raw, "@") {
				urls[i] = "xxxxx" // unparsable, and it may hold a secret
			}
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		urls[i] = u.String()
	}
	return strings.Join(urls, ",")
}

// openStore opens the lease store of bucket on nc without creating the
// bucket.
func (f *connFlags) openStore(ctx context.Context, nc *nats.Conn, bucket string) (*natsstore.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	s, err := natsstore.NewConn(ctx, nc, natsstore.Config{Bucket: bucket, NoCreate: true, Domain: f.domain, Timeout: f.timeout})
	switch {
	case errors.Is(err, natsstore.ErrNoBucket):
		return nil, fmt.Errorf("bucket %q not found on %s (a service creates it when it first starts; "+
			"is the name, the account or the JetStream domain right?)", bucket, f.servers())
	case errors.Is(err, lease.ErrInvalid):
		return nil, &usageError{err.Error()}
	case err != nil:
		return nil, fmt.Errorf("open bucket %q: %w", bucket, err)
	}
	return s, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
