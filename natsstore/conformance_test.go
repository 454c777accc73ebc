package natsstore_test

import (
	"testing"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
)

// The conformance suite runs against a single server and a 3-node cluster
// in both expiry modes. The runs are independent and run in parallel: most
// of their time is spent waiting for TTLs. With -nats.url (make conformance
// NATS_URL=...), the single-server runs use that server instead, in
// whatever expiry mode it supports.

func TestConformanceSingleNode(t *testing.T) {
	t.Parallel()
	tg := serverUnderTest(t)
	cfg := tg.config(t, natsstore.Config{})
	probe := tg.store(t, cfg)
	var opts []leasetest.Option
	switch {
	case !tg.external && probe.Expiry() != natsstore.ExpiryServer:
		t.Fatalf("expiry mode %v, want server", probe.Expiry())
	case probe.Expiry() == natsstore.ExpiryObserved:
		t.Logf("the server or the bucket has no per-message TTLs: expiry is observed")
		opts = append(opts, leasetest.WithoutExpiryEvents())
	}
	leasetest.Run(t, func(t *testing.T) lease.Store { return tg.store(t, cfg) }, opts...)
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	leasetest.Run(t, func(t *testing.T) lease.Store {
		return dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	}, leasetest.WithRounds(10))
}

func TestConformanceObservedExpiry(t *testing.T) {
	t.Parallel()
	tg := serverUnderTest(t)
	cfg := tg.config(t, natsstore.Config{Bucket: "legacy", Expiry: natsstore.ExpiryObserved})
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s := tg.store(t, cfg)
		if s.Expiry() != natsstore.ExpiryObserved {
			t.Fatalf("expiry mode %v, want observed", s.Expiry())
		}
		return s
	}, leasetest.WithoutExpiryEvents())
}
