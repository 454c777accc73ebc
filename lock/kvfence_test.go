package lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// kvFence is the fencing rule applied to a NATS KV key: the value carries
// the highest token that wrote it, and a write goes through only with a
// token at least that high, with a compare-and-swap on the revision it
// read, so that no write can slip in between the check and the write. It is
// the snippet of the package documentation, runnable.
type kvFence struct {
	kv  jetstream.KeyValue
	key string

	beforeUpdate func() // test hook: runs between the read and the write
}

type fencedValue struct {
	Fence lease.Token `json:"fence"`
	Data  string      `json:"data"`
}

// Write stores data if token is at least the stored fence. It returns an
// error matching lease.ErrStaleToken when a newer owner has written.
func (f kvFence) Write(ctx context.Context, token lease.Token, data string) error {
	next, err := json.Marshal(fencedValue{Fence: token, Data: data})
	if err != nil {
		return err
	}
	for {
		e, err := f.kv.Get(ctx, f.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			_, err = f.kv.Create(ctx, f.key, next)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // created meanwhile: check its fence
			}
			return err
		}
		if err != nil {
			return err
		}
		var cur fencedValue
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return err
		}
		if token < cur.Fence {
			return fmt.Errorf("%w: %d < %d", lease.ErrStaleToken, token, cur.Fence)
		}
		if f.beforeUpdate != nil {
			f.beforeUpdate()
		}
		_, err = f.kv.Update(ctx, f.key, next, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // written meanwhile: read it again
		}
		return err
	}
}

func TestFenceNATSKVCompareAndSwap(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The resource: a KV bucket of its own.
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	accounts, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "accounts"})
	require.NoError(t, err)

	// Two nodes; A's renewals can be broken.
	open := func() *natsstore.Store {
		s, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{Bucket: "locks"})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		return s
	}
	faults := leasetest.NewFaultStore(open())
	a, err := lock.New(faults, lock.Config{OwnerID: "node-a", TTL: 2 * time.Second})
	require.NoError(t, err)
	defer a.Close(context.Background())
	b, err := lock.New(open(), lock.Config{OwnerID: "node-b", TTL: 2 * time.Second})
	require.NoError(t, err)
	defer b.Close(context.Background())

	fence := kvFence{kv: accounts, key: "account.42"}
	ga, err := a.Acquire(ctx, "account.42")
	require.NoError(t, err)
	tokenA, err := ga.Token()
	require.NoError(t, err)
	require.NoError(t, fence.Write(ctx, tokenA, "a1"))

	// A stops renewing (a partition, a long pause); B takes over once A's
	// key has expired at the server, and writes.
	faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)
	gb, err := b.Acquire(ctx, "account.42")
	require.NoError(t, err)
	tokenB, err := gb.Token()
	require.NoError(t, err)
	require.Greater(t, tokenB, tokenA)
	assert.True(t, closed(ga.Lost()), "A was poisoned before its key expired")
	require.NoError(t, fence.Write(ctx, tokenB, "b1"))

	// A, with the token it kept, is refused.
	err = fence.Write(ctx, tokenA, "a2")
	assert.ErrorIs(t, err, lease.ErrStaleToken)

	// And a stale write racing a newer one is refused too: A reads the
	// value while its fence is still A's, B writes before A's write, and
	// the compare-and-swap sends A back to read B's fence.
	require.NoError(t, gb.Release(ctx))
	faults.Heal()
	ga2, err := a.Acquire(ctx, "account.42")
	require.NoError(t, err)
	tokenA2, _ := ga2.Token()
	require.NoError(t, fence.Write(ctx, tokenA2, "a3"))
	faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)
	gb2, err := b.Acquire(ctx, "account.42")
	require.NoError(t, err)
	tokenB2, _ := gb2.Token()

	fired := false
	racing := kvFence{kv: accounts, key: "account.42", beforeUpdate: func() {
		if !fired { // B writes between A's read (which passed the check) and A's write
			fired = true
			require.NoError(t, fence.Write(ctx, tokenB2, "b2"))
		}
	}}
	err = racing.Write(ctx, tokenA2, "a4")
	assert.True(t, fired)
	assert.ErrorIs(t, err, lease.ErrStaleToken, "the compare-and-swap failed, and the second read saw B's fence")

	e, err := accounts.Get(ctx, "account.42")
	require.NoError(t, err)
	var v fencedValue
	require.NoError(t, json.Unmarshal(e.Value(), &v))
	assert.Equal(t, fencedValue{Fence: tokenB2, Data: "b2"}, v, "the newest owner's write stands")
}
