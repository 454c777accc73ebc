package natstest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

// Cutting a proxy's connections makes its clients reconnect, through it, to
// the same server.
func TestProxyCut(t *testing.T) {
	srv := natstest.Start(t)
	p := natstest.StartProxy(t, srv.ClientURL())
	reconnected := make(chan struct{}, 1)
	nc, js := connect(t, p.URL(), nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	_, err := js.AccountInfo(ctxT(t))
	require.NoError(t, err)

	p.Cut()
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not reconnect")
	}
	require.Equal(t, p.URL(), nc.ConnectedUrl())
	_, err = js.AccountInfo(ctxT(t))
	require.NoError(t, err)
}
