package shard_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/shard"
)

// stoppingStore is a member's fault store that can stop for good, as a
// natsstore.Store does once its bucket is deleted: every call then fails
// with the error it stopped with, which Err returns.
type stoppingStore struct {
	*leasetest.FaultStore
	err atomic.Pointer[error]
}

func (s *stoppingStore) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *stoppingStore) stop(err error) {
	s.err.Store(&err)
	s.FailAll(leasetest.OpAll, err)
}

// TestStoppedStoreEndsHostRun: a member whose store stopped for good ends
// Run with the store's error (actors.ErrStoreStopped), after handing over
// what it can, so that its process exits and is restarted; it no longer
// quarantines its shards and its membership one after another and goes on
// running, not ready, until restarted by hand. The others take its shards.
func TestStoppedStoreEndsHostRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 8)
		var store *stoppingStore
		r.tune = func(c *shard.Config) {
			store = &stoppingStore{FaultStore: c.Store.(*leasetest.FaultStore)}
			c.Store = store
		}
		a := r.start("node-a")
		r.tune = nil
		r.start("node-b")
		r.awaitBalance(time.Now(), time.Second)

		stopped := fmt.Errorf(`natsstore: bucket "leases": bucket deleted: %w`, lease.ErrStoreConfig)
		store.stop(stopped)
		var err error
		select {
		case err = <-a.done:
		case <-time.After(r.lc.TTL):
			t.Fatalf("Run did not return within the TTL of the store stopping: %+v", a.host.Status())
		}
		a.cancel()
		a.cancel = nil
		delete(r.hosts, "node-a")
		require.ErrorIs(t, err, actors.ErrStoreStopped)
		assert.ErrorIs(t, err, lease.ErrStoreConfig)
		assert.ErrorContains(t, err, "bucket deleted")
		assert.Equal(t, shard.StateStopped, a.host.Status().State)
		assert.Empty(t, since[shard.ShardQuarantined](r.check, 0), "nothing is quarantined")

		took := r.awaitBalance(time.Now(), 2*r.lc.TTL)
		t.Logf("node-b runs every shard %v after node-a's Run returned", took)
		r.check.safe(t)
	})
}
