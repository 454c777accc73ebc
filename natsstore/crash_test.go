package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A holder crashes (its connection closes without a release): a standby
// that watches the key takes the lease over after its TTL, never before,
// in both expiry modes. With -nats.url it checks your own server: ExpiryAuto
// is what that server and the bucket support.
func TestCrashTakeover(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryAuto, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			tg := serverUnderTest(t)
			cfg := tg.config(t, natsstore.Config{Bucket: "crash_" + mode.String(), Expiry: mode, MaxTTL: 10 * time.Second})
			holder := tg.store(t, cfg)
			standby := tg.store(t, cfg)
			c := claim("job", "owner-a")
			l := mustAcquire(t, holder, c)
			var lastSend time.Time
			for range 2 {
				time.Sleep(ttl / 3)
				lastSend = time.Now()
				var err error
				l, err = holder.Renew(ctxT(t), l)
				require.NoError(t, err)
			}
			require.NoError(t, holder.Close()) // the crash: no release

			ctx, cancel := context.WithTimeout(context.Background(), ttl+15*time.Second)
			defer cancel()
			got, at, err := takeOver(ctx, standby, claim("job", "owner-b"), 250*time.Millisecond)
			require.NoError(t, err)
			after := at.Sub(lastSend)
			t.Logf("expiry %v: taken over %v after the last renewal was sent (TTL %v)", standby.Expiry(), after, ttl)
			assert.GreaterOrEqual(t, after, ttl-ttl/10, "taken over before the holder's validity ended")
			assert.Greater(t, got.Token, l.Token)
		})
	}
}

// takeOver waits for c as a standby that watches the key: it tries at once
// when the watch reports the key free, one TTL after the watch last showed
// it held (when an expiry the server does not report is due: the store
// starts its observation clock at that event too), and every poll
// regardless. It returns the lease and when it was acquired.
func takeOver(ctx context.Context, s *natsstore.Store, c lease.Claim, poll time.Duration) (lease.Lease, time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.Watch(ctx, c.LeaseID)
	if err != nil {
		return lease.Lease{}, time.Time{}, err
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	for {
		a, err := s.Acquire(ctx, c)
		if err != nil || a.Acquired {
			return a.Lease, time.Now(), err
		}
		if err := nextTry(ctx, events, due, tick.C); err != nil {
			return lease.Lease{}, time.Time{}, err
		}
	}
}

// nextTry waits until a standby should try again: the key reported free,
// the expiry due after the last held event, or the next poll.
func nextTry(ctx context.Context, events <-chan lease.Event, due *time.Timer, poll <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-events:
			if ev.Kind == lease.EventHeld && ev.Holder.TTL > 0 {
				due.Reset(ev.Holder.TTL)
				continue
			}
		case <-due.C:
		case <-poll:
		}
		return nil
	}
}
