//go:build unix

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// stopped is a store whose Err is err.
type stopped struct{ err error }

func (s stopped) Err() error { return s.err }

// TestStoreStopped: an instance whose store had stopped fails, even when
// its Host stopped cleanly on SIGTERM; one whose store works does not, and
// the Host's own error comes first.
func TestStoreStopped(t *testing.T) {
	gone := errors.New(`natsstore: bucket "aster_shards" deleted`)
	assert.NoError(t, storeStopped(nil, stopped{}))
	err := storeStopped(nil, stopped{gone})
	require.ErrorIs(t, err, gone)
	assert.EqualError(t, err, `the lease store had stopped: natsstore: bucket "aster_shards" deleted`)
	own := errors.New("host failed")
	assert.Equal(t, own, storeStopped(own, stopped{gone}))
}

// TestInstanceExitsWhenItsBucketIsDeleted: an instance whose bucket is
// deleted under it returns the store's error by itself, without waiting
// for a SIGTERM (its process exits 1, and whatever runs it restarts it).
func TestInstanceExitsWhenItsBucketIsDeleted(t *testing.T) {
	srv := natstest.Start(t)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/write" {
			_, _ = io.WriteString(w, `{"accepted":true}`)
		}
	}))
	t.Cleanup(hub.Close)
	cfg := instanceConfig{name: "i1", hub: hub.URL, bucket: "shards_stopped", urls: []string{srv.ClientURL()},
		ttl: time.Second, shards: 2, replicas: 1}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runInstance(ctx, cfg, slog.New(slog.DiscardHandler)) }()

	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		kv, err := js.KeyValue(t.Context(), cfg.bucket)
		if err != nil {
			return false
		}
		keys, err := kv.ListKeys(t.Context())
		if err != nil {
			return false
		}
		n := 0
		for range keys.Keys() {
			n++
		}
		return n > cfg.shards // the shards' leases and the member's
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, js.DeleteKeyValue(t.Context(), cfg.bucket))

	select {
	case err := <-done:
		require.ErrorIs(t, err, actors.ErrStoreStopped)
		assert.ErrorIs(t, err, lease.ErrStoreConfig)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("the instance did not exit within 30 s of its bucket's deletion (it returned %v once cancelled)", <-done)
	}
}
