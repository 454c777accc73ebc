package shardtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/shard/shardtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T) *shardtest.MemStore {
	s := shardtest.NewMemStore()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMemStoreIsADirectory(t *testing.T) {
	shardtest.Run(t, func(t *testing.T) shardtest.Store { return newStore(t) }, shardtest.InVirtualTime())
}

func TestMemStoreIsAStore(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) }, leasetest.InVirtualTime())
}
