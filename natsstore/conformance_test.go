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
// of their time is spent waiting for TTLs.

func TestConformanceSingleNode(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s := dial(t, srv.ClientURL(), natsstore.Config{})
		if s.Expiry() != natsstore.ExpiryServer {
			t.Fatalf("expiry mode %v, want server", s.Expiry())
		}
		return s
	})
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
	srv := natstest.Start(t)
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "legacy", Expiry: natsstore.ExpiryObserved})
		if s.Expiry() != natsstore.ExpiryObserved {
			t.Fatalf("expiry mode %v, want observed", s.Expiry())
		}
		return s
	}, leasetest.WithoutExpiryEvents())
}
