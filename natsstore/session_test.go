package natsstore_test

import (
	"testing"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
)

// The session conformance suite runs against a single server in both
// expiry modes.

func TestSessionConformance(t *testing.T) {
	t.Parallel()
	tg := serverUnderTest(t)
	cfg := tg.config(t, natsstore.Config{Bucket: "sessions"})
	var opts []leasetest.Option
	if tg.store(t, cfg).Expiry() == natsstore.ExpiryObserved {
		opts = append(opts, leasetest.WithoutExpiryEvents())
	}
	leasetest.RunSessions(t, func(t *testing.T) lease.SessionStore { return tg.store(t, cfg) }, opts...)
}

func TestSessionConformanceObservedExpiry(t *testing.T) {
	t.Parallel()
	tg := serverUnderTest(t)
	cfg := tg.config(t, natsstore.Config{Bucket: "sessions_legacy", Expiry: natsstore.ExpiryObserved})
	leasetest.RunSessions(t, func(t *testing.T) lease.SessionStore { return tg.store(t, cfg) },
		leasetest.WithoutExpiryEvents())
}
