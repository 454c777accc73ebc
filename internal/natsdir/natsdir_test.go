package natsdir_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/natsdir"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard/shardtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is a natsstore.Store with a natsdir.Directory over its bucket.
type store struct {
	*natsstore.Store
	*natsdir.Directory
}

// WatchPrefix is the Directory's (natsstore.Store has one of its own).
func (s store) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	return s.Directory.WatchPrefix(ctx, prefix)
}

func TestDirectory(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL(), nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := natsstore.NewConn(ctx, nc, natsstore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, st.Bucket())
	require.NoError(t, err)
	dir := natsdir.New(kv, st, 0)
	shardtest.Run(t, func(*testing.T) shardtest.Store { return store{st, dir} })
}
