package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// In ExpiryObserved mode a standby's observation clock starts when its
// watch delivers the holder's revision, not at its first poll: one TTL
// after the last event, its first Acquire takes the lease.
func TestObservedClockStartsAtTheWatchEvent(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoStores(t, natsstore.Config{Expiry: natsstore.ExpiryObserved})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := b.Watch(ctx, "job")
	require.NoError(t, err)
	held := mustAcquire(t, a, claim("job", "owner-a"))
	ev := awaitEvent(t, events, lease.EventHeld, held.Revision)
	time.Sleep(ev.Holder.TTL + 20*time.Millisecond)
	got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	require.True(t, got.Acquired, "the standby's first poll, one TTL after the watch event, did not take the lease")
}
