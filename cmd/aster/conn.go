package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

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

// connect connects to NATS.
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
		opts = append(opts, nats.UserCredentials(f.creds))
	case f.nkey != "":
		o, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
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
	if f.cert != "" || f.ca != "" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if f.cert != "" {
		opts = append(opts, nats.ClientCert(f.cert, f.key))
	}
	if f.ca != "" {
		opts = append(opts, nats.RootCAs(f.ca))
	}
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
			return nil, f.explain(r.err)
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

// explain says what a connection error means.
func (f *connFlags) explain(err error) error {
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(msg, "authorization"), strings.Contains(msg, "authentication"):
		return fmt.Errorf("connect to %s: the server refused the credentials: %w (check --creds, --nkey, --user/--password or --token)",
			f.server, err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("connect to %s: %w (is a NATS server running there? For development, start one with: aster dev)",
			f.server, err)
	default:
		return fmt.Errorf("connect to %s: %w", f.server, err)
	}
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
			"is the name, the account or the JetStream domain right?)", bucket, f.server)
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
