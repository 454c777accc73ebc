package natstest_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

func TestStartAndRestartKeepsData(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.ClientURL()
	require.Contains(t, url, "nats://127.0.0.1:")
	_, js := connect(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
	require.NoError(t, err)
	rev, err := kv.Put(ctxT(t), "k", []byte("v"))
	require.NoError(t, err)

	srv.Restart(t)
	assert.True(t, srv.Running())
	assert.Equal(t, url, srv.ClientURL(), "the port survives a restart")

	require.Eventually(t, func() bool {
		e, err := kv.Get(ctxT(t), "k")
		return err == nil && e.Revision() == rev && string(e.Value()) == "v"
	}, 10*time.Second, 10*time.Millisecond, "the value survives a restart")

	srv.Shutdown()
	srv.Shutdown() // idempotent
	assert.False(t, srv.Running())
	assert.Nil(t, srv.NATS())
}

func TestUserPassword(t *testing.T) {
	srv := natstest.Start(t, natstest.WithUser("alice", "secret"))
	_, err := nats.Connect(srv.ClientURL())
	require.Error(t, err, "anonymous connection")
	_, err = nats.Connect(srv.ClientURL(), nats.UserInfo("alice", "wrong"))
	require.Error(t, err)
	connect(t, srv.ClientURL(), nats.UserInfo("alice", "secret"))
}

func TestNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	srv := natstest.Start(t, natstest.WithNKey(pub))
	_, err = nats.Connect(srv.ClientURL())
	require.Error(t, err, "anonymous connection")
	opt := nats.Nkey(pub, func(nonce []byte) ([]byte, error) { return kp.Sign(nonce) })
	connect(t, srv.ClientURL(), opt)
}

func TestToken(t *testing.T) {
	srv := natstest.Start(t, natstest.WithToken("s3cret"))
	_, err := nats.Connect(srv.ClientURL())
	require.Error(t, err)
	connect(t, srv.ClientURL(), nats.Token("s3cret"))
}

func TestRestrictedUser(t *testing.T) {
	srv := natstest.Start(t,
		natstest.WithUser("admin", "a"),
		natstest.WithRestrictedUser("guest", "g", []string{"allowed.>"}, []string{"allowed.>"}))
	nc, _ := connect(t, srv.ClientURL(), nats.UserInfo("guest", "g"))
	errs := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	require.NoError(t, nc.Publish("denied.x", nil))
	select {
	case err := <-errs:
		assert.ErrorContains(t, err, "Permissions Violation")
	case <-time.After(10 * time.Second):
		t.Fatal("no permissions violation reported")
	}
}

func TestWithoutJetStream(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream())
	_, js := connect(t, srv.ClientURL())
	_, err := js.AccountInfo(ctxT(t))
	require.Error(t, err)
}

func TestCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	require.Len(t, c.Servers, 3)
	_, js := connect(t, c.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "r3", Replicas: 3, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	st, err := kv.Status(ctxT(t))
	require.NoError(t, err)
	assert.Equal(t, 3, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas)
	rev, err := kv.Put(ctxT(t), "k", []byte("v"))
	require.NoError(t, err)

	// Client and route ports come from below the kernel's ephemeral range,
	// so that no outgoing connection takes one while its server restarts.
	for _, s := range c.Servers {
		u, err := url.Parse(s.ClientURL())
		require.NoError(t, err)
		port, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		assert.Less(t, port, 32768, "client port of %s", s.Name())
		assert.Less(t, s.NATS().ClusterAddr().Port, 32768, "route port of %s", s.Name())
	}

	leader := c.StreamLeader("$G", "KV_r3")
	require.NotNil(t, leader)
	leader.Restart(t)
	c.WaitReady(t)
	require.Eventually(t, func() bool {
		e, err := kv.Get(ctxT(t), "k")
		return err == nil && e.Revision() == rev
	}, 20*time.Second, 20*time.Millisecond, "the value survives a leader restart")
	_, err = kv.Put(ctxT(t), "k", []byte("w"))
	require.NoError(t, err)
}
