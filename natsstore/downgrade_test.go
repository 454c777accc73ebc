package natsstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// downgradable is a JetStream context whose server can be made to look
// older than 2.11 (JetStream API level 0), as after replacing the server by
// an older one on the same store directory.
type downgradable struct {
	jetstream.JetStream
	old atomic.Bool
}

func (d *downgradable) AccountInfo(ctx context.Context) (*jetstream.AccountInfo, error) {
	info, err := d.JetStream.AccountInfo(ctx)
	if err != nil || !d.old.Load() {
		return info, err
	}
	c := *info
	c.API.Level = 0
	return &c, nil
}

// The server's capabilities are checked again after every reconnect: a
// store that opened in server-expiry mode stops trusting per-message TTLs
// once the server that comes back predates them.
func TestCapabilitiesRecheckedAfterReconnect(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	for _, tc := range []struct {
		expiry natsstore.ExpiryMode
		fatal  bool
	}{{natsstore.ExpiryAuto, false}, {natsstore.ExpiryServer, true}} {
		_, js := conn(t, srv.ClientURL())
		d := &downgradable{JetStream: js}
		var events eventLog
		s, err := natsstore.New(openCtx(t), d, natsstore.Config{Bucket: "downgrade_" + tc.expiry.String(),
			Expiry: tc.expiry, OnEvent: events.add})
		require.NoError(t, err)
		defer s.Close()
		require.Equal(t, natsstore.ExpiryServer, s.Expiry())
		held := mustAcquire(t, s, claim("job", "owner-a"))

		d.old.Store(true)
		srv.Restart(t)
		if tc.fatal {
			var err error
			require.Eventually(t, func() bool {
				_, err = s.Renew(ctxT(t), held)
				return errors.Is(err, lease.ErrStoreConfig)
			}, 10*time.Second, 20*time.Millisecond, "last error: %v", err)
			continue
		}
		require.Eventually(t, func() bool { return s.Expiry() == natsstore.ExpiryObserved }, 10*time.Second,
			20*time.Millisecond, "still trusting per-message TTLs after the server lost them")
		assert.Contains(t, events.all(), natsstore.Event(natsstore.ExpiryFallback{Bucket: s.Bucket(),
			Reason: "the server (JetStream API level 0) predates per-message TTLs (nats-server 2.11)"}))
	}
}
