package natsstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

// Flags that point the conformance and crash-takeover tests at a server of
// your own (make conformance NATS_URL=...): without -nats.url they start a
// server in process.
var (
	natsURL      = flag.String("nats.url", "", "run TestConformance* and TestCrashTakeover against this NATS server")
	natsCreds    = flag.String("nats.creds", "", "credentials file for -nats.url")
	natsUser     = flag.String("nats.user", "", "user for -nats.url")
	natsPassword = flag.String("nats.password", "", "password for -nats.user")
	natsCA       = flag.String("nats.ca", "", "root CA file for TLS to -nats.url")
	natsDomain   = flag.String("nats.domain", "", "JetStream domain for -nats.url")
)

// target is the server a test runs against: a server of the user's
// (-nats.url), or one started in process.
type target struct {
	url      string
	dial     natsstore.DialOptions
	domain   string
	external bool
}

// serverUnderTest returns the server the conformance tests use.
func serverUnderTest(t *testing.T) target {
	t.Helper()
	if *natsURL == "" {
		return target{url: natstest.Start(t).ClientURL()}
	}
	t.Logf("testing against %s", *natsURL)
	return target{url: *natsURL, external: true, domain: *natsDomain, dial: natsstore.DialOptions{
		CredentialsFile: *natsCreds, User: *natsUser, Password: *natsPassword, CAFile: *natsCA,
	}}
}

// config returns a store configuration for a test on tg: on a server of the
// user's, a bucket of its own, deleted when the test ends.
func (tg target) config(t *testing.T, cfg natsstore.Config) natsstore.Config {
	t.Helper()
	cfg.Domain = tg.domain
	if !tg.external {
		return cfg
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg.Bucket = "aster_conformance_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { tg.deleteBucket(t, cfg.Bucket) })
	return cfg
}

// store opens a store on tg, closed when the test ends.
func (tg target) store(t *testing.T, cfg natsstore.Config) *natsstore.Store {
	t.Helper()
	return dial(t, tg.url, cfg, tg.dial)
}

// deleteBucket removes a bucket a test made on a server of the user's.
func (tg target) deleteBucket(t *testing.T, name string) {
	opts := []nats.Option{nats.Timeout(5 * time.Second)}
	switch {
	case *natsCreds != "":
		opts = append(opts, nats.UserCredentials(*natsCreds))
	case *natsUser != "":
		opts = append(opts, nats.UserInfo(*natsUser, *natsPassword))
	}
	if *natsCA != "" {
		opts = append(opts, nats.RootCAs(*natsCA))
	}
	nc, err := nats.Connect(tg.url, opts...)
	if err != nil {
		t.Logf("cannot delete bucket %s: %v", name, err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if tg.domain != "" {
		js, err = jetstream.NewWithDomain(nc, tg.domain)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = js.DeleteStream(ctx, "KV_"+name)
	}
	if err != nil {
		t.Logf("cannot delete bucket %s: %v", name, err)
	}
}
