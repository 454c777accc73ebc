package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctxT returns a context bounded for one step of a test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial opens a store on url and closes it when the test ends.
func dial(t testing.TB, url string, cfg natsstore.Config, d ...natsstore.DialOptions) *natsstore.Store {
	t.Helper()
	var opts natsstore.DialOptions
	if len(d) > 0 {
		opts = d[0]
	}
	opts.URLs = []string{url}
	opts.ReconnectWait = 20 * time.Millisecond
	s, err := natsstore.Dial(ctxT(t), opts, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// conn opens a raw connection for checks and tampering.
func conn(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectBufSize(-1)}, opts...)
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// bucket binds to a bucket with a raw connection.
func bucket(t testing.TB, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(ctxT(t), name)
	require.NoError(t, err)
	return kv
}

var _ = natstest.Start
