package natsstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

// A watch goes down while its key is written all the time. startHints asks
// for a first read of the key and subscribes to the key's writes; a write
// the subscription saw before that read was asked for once filled the wake
// channel, and startHints then blocked for good (on the run's goroutine: the
// watch never delivered again and Close waited in vain), after writing the
// pending map beside the subscription's goroutine. It returns at once, with
// the read asked for, every time.
func TestStartHintsWhileTheKeyIsWritten(t *testing.T) {
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	ctx, cancel := context.WithCancel(t.Context())
	var writer sync.WaitGroup
	writer.Go(func() {
		for ctx.Err() == nil { // plain publishes: the subscription sees each, stored or not
			for range 20 {
				_ = nc.Publish(s.putPrefix+"job", nil)
			}
			_ = nc.Flush()
		}
	})
	defer writer.Wait()
	defer cancel()

	for range 30 {
		r := s.watches.newWatchRun("job", nil)
		started := make(chan struct{})
		go func() {
			defer close(started)
			r.startHints()
		}()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("startHints blocked")
		}
		require.NotNil(t, r.hint, "subscribed")
		require.Contains(t, r.hint.take(), "job", "the key is to be read")
		r.stopHints()
	}
}
