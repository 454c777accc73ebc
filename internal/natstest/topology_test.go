package natstest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

func TestProxyFreeze(t *testing.T) {
	srv := natstest.Start(t)
	p := natstest.StartProxy(t, srv.ClientURL())
	nc, _ := connect(t, p.URL())
	require.NoError(t, nc.FlushTimeout(5*time.Second))

	p.Freeze(true)
	require.Error(t, nc.FlushTimeout(100*time.Millisecond), "nothing passes while frozen")
	assert.Equal(t, nats.CONNECTED, nc.Status(), "the connection stays up")
	p.Freeze(false)
	require.NoError(t, nc.FlushTimeout(5*time.Second))
}

func TestOperatorCredentials(t *testing.T) {
	op := natstest.NewOperator(t)
	app := op.Account(t, "APP", nil)
	srv := natstest.Start(t, op.Trusted())
	dir := t.TempDir()

	creds := filepath.Join(dir, "ok.creds")
	user := app.WriteCreds(t, creds, natstest.Allow([]string{"$JS.API.INFO"}, []string{"_INBOX.>"}))
	nc, _ := connect(t, srv.ClientURL(), nats.UserCredentials(creds))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.AccountInfo(ctxT(t))
	require.NoError(t, err, "the account has JetStream")

	expired := filepath.Join(dir, "expired.creds")
	app.WriteCreds(t, expired, func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(-time.Minute).Unix() })
	_, err = nats.Connect(srv.ClientURL(), nats.UserCredentials(expired))
	require.ErrorIs(t, err, nats.ErrAuthorization)

	app.Update(t, func(ac *jwt.AccountClaims) { ac.Revoke(user) }, srv)
	_, err = nats.Connect(srv.ClientURL(), nats.UserCredentials(creds))
	require.ErrorIs(t, err, nats.ErrAuthorization, "revoked")
}

func TestLeafReachesHubDomain(t *testing.T) {
	hub := natstest.Start(t, natstest.WithDomain("hub"), natstest.WithLeafNodes(t))
	leaf := natstest.StartLeaf(t, hub)
	nc, _ := connect(t, leaf.ClientURL())
	js, err := jetstream.NewWithDomain(nc, "hub")
	require.NoError(t, err)
	// The hub's JetStream API reaches the leaf's clients a moment after the
	// leaf connection itself (its interest is sent over it): ask until then.
	var info *jetstream.AccountInfo
	require.Eventually(t, func() bool {
		info, err = js.AccountInfo(ctxT(t))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the hub's domain through the leaf: %v", err)
	assert.Equal(t, "hub", info.Domain)
}

func TestWithConfig(t *testing.T) {
	srv := natstest.Start(t, natstest.WithConfig(t, `accounts { A: { jetstream: enabled, users: [{user: a, password: pw}] } }`))
	_, err := nats.Connect(srv.ClientURL(), nats.UserInfo("a", "wrong"))
	require.Error(t, err)
	nc, _ := connect(t, srv.ClientURL(), nats.UserInfo("a", "pw"))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.AccountInfo(ctxT(t))
	require.NoError(t, err)
}

func TestPermissionsPerTopology(t *testing.T) {
	for _, tc := range []struct {
		top       natstest.Topology
		api, keys string
		inbox     string
	}{
		{natstest.Topology{}, "$JS.API.", "$KV.b.>", "_INBOX.>"},
		{natstest.Topology{Domain: "hub"}, "$JS.API.", "$KV.b.>", "_INBOX.>"},
		{natstest.Topology{Domain: "hub", Leaf: true}, "$JS.hub.API.", "$JS.hub.API.$KV.b.>", "_INBOX.>"},
		{natstest.Topology{APIPrefix: "JS.A.API", InboxPrefix: "_INBOX_B"}, "JS.A.API.", "JS.A.API.$KV.b.>", "_INBOX_B.>"},
	} {
		pub, sub := natstest.Permissions("b", tc.top)
		var subjects []string
		for _, p := range pub {
			subjects = append(subjects, p.Subject)
		}
		assert.Contains(t, subjects, tc.api+"STREAM.MSG.GET.KV_b", "%+v", tc.top)
		assert.Contains(t, subjects, tc.keys, "%+v", tc.top)
		assert.Contains(t, subjects, "$JS.FC.KV_b.>", "%+v", tc.top)
		assert.Equal(t, []string{tc.inbox}, sub, "%+v", tc.top)
	}
	require.Error(t, natstest.Topology{Leaf: true}.Validate())
	require.Error(t, natstest.Topology{Domain: "d", APIPrefix: "p"}.Validate())
}
