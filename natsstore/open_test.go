package natsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// openCtx is a generous deadline for opening a store: the tests check that
// failures come long before it.
func openCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// works checks that s can take and release a lease.
func works(t *testing.T, s *natsstore.Store) {
	t.Helper()
	l := mustAcquire(t, s, claim("job", "owner-a"))
	l, err := s.Renew(ctxT(t), l)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctxT(t), l))
}

func TestDialUserPassword(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "alice", Password: "s3cret"}))

	for _, d := range []natsstore.DialOptions{
		{User: "alice", Password: "wrong"},
		{User: "mallory", Password: "s3cret"},
		{},
	} {
		d.URLs = []string{srv.ClientURL()}
		ctx := openCtx(t)
		_, err := natsstore.Dial(ctx, d, natsstore.Config{})
		require.ErrorIs(t, err, natsstore.ErrAuthentication, "%+v", d)
		assert.Contains(t, err.Error(), "Authorization Violation")
		require.NoError(t, ctx.Err(), "the refusal must not wait for the deadline")
	}
}

func TestDialNKey(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))

	srv := natstest.Start(t, natstest.WithNKey(pub))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{NKeySeedFile: seedFile}))

	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	require.NoError(t, os.WriteFile(otherFile, otherSeed, 0o600))
	_, err = natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}, NKeySeedFile: otherFile},
		natsstore.Config{})
	require.ErrorIs(t, err, natsstore.ErrAuthentication)

	_, err = natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()},
		NKeySeedFile: filepath.Join(t.TempDir(), "missing.nk")}, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrInvalid)
}

func TestDialToken(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithToken("t0ken"))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{Token: "t0ken", Name: "aster-test"}))
	_, err := natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}, Token: "nope"},
		natsstore.Config{})
	require.ErrorIs(t, err, natsstore.ErrAuthentication)
}

// A user who may not use the bucket gets a clear error at once, not a hang.
func TestDialWithoutPermission(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t,
		natstest.WithUser("admin", "a"),
		// May use the JetStream API but not write the bucket's keys.
		natstest.WithRestrictedUser("reader", "r", []string{"$JS.API.>"}, []string{"_INBOX.>"}),
		// May not use JetStream at all.
		natstest.WithRestrictedUser("outsider", "o", []string{"app.>"}, []string{"_INBOX.>", "app.>"}),
		// May not receive answers.
		natstest.WithRestrictedUser("deaf", "d", []string{">"}, []string{"app.>"}),
	)
	// The bucket exists (an admin created it).
	dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "admin", Password: "a"})

	for _, user := range []string{"reader", "outsider", "deaf"} {
		t.Run(user, func(t *testing.T) {
			ctx := openCtx(t)
			_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()},
				User: user, Password: user[:1]}, natsstore.Config{})
			require.ErrorIs(t, err, natsstore.ErrPermission)
			assert.Contains(t, err.Error(), "Permissions Violation")
			require.NoError(t, ctx.Err(), "the refusal must not wait for the deadline")
		})
	}
}

func TestDialUnreachable(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	url := srv.ClientURL()
	srv.Shutdown()
	ctx := openCtx(t)
	_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}}, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.NoError(t, ctx.Err())
}

func TestDialOptionsValidation(t *testing.T) {
	t.Parallel()
	for _, d := range []natsstore.DialOptions{
		{User: "a", Token: "t"},
		{CredentialsFile: "x.creds", NKeySeedFile: "x.nk"},
		{CertFile: "cert.pem"},
		{ReconnectWait: -time.Second},
		{ConnectTimeout: -time.Second},
	} {
		_, err := natsstore.Dial(openCtx(t), d, natsstore.Config{})
		require.ErrorIs(t, err, lease.ErrInvalid, "%+v", d)
	}
	for _, c := range []natsstore.Config{
		{Bucket: "has space"},
		{Bucket: "dots.are.bad"},
		{Replicas: 7},
		{Replicas: -1},
		{Domain: "hub", APIPrefix: "$JS.hub.API"},
		{Timeout: -1},
		{MarkerTTL: -1},
		{MaxTTL: -1},
		{MaxTTL: 500 * time.Millisecond},
		{Expiry: 9},
	} {
		_, err := natsstore.Dial(openCtx(t), natsstore.DialOptions{}, c)
		require.ErrorIs(t, err, lease.ErrInvalid, "%+v", c)
	}
	_, err := natsstore.New(openCtx(t), nil, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrInvalid)
	_, err = natsstore.NewConn(openCtx(t), nil, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrInvalid)
}

// Existing deployments: an existing connection or JetStream context.
func TestNewFromExistingConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, js := conn(t, srv.ClientURL())

	s, err := natsstore.NewConn(openCtx(t), nc, natsstore.Config{Bucket: "from_conn"})
	require.NoError(t, err)
	works(t, s)
	require.NoError(t, s.Close())
	assert.False(t, nc.IsClosed(), "the caller's connection stays open")

	s, err = natsstore.New(openCtx(t), js, natsstore.Config{Bucket: "from_js"})
	require.NoError(t, err)
	works(t, s)
	require.NoError(t, s.Close())
	assert.False(t, nc.IsClosed())
}

func TestJetStreamDomainAndPrefix(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithOptions(func(o *server.Options) { o.JetStreamDomain = "hub" }))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{Domain: "hub"}))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{APIPrefix: "$JS.hub.API"}))
	nc, _ := conn(t, srv.ClientURL())
	js, err := jetstream.NewWithDomain(nc, "hub")
	require.NoError(t, err)
	s, err := natsstore.New(openCtx(t), js, natsstore.Config{})
	require.NoError(t, err)
	defer s.Close()
	works(t, s)
}

func TestCreatedBucketConfig(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "fresh", MarkerTTL: 90 * time.Second})
	assert.Equal(t, natsstore.ExpiryServer, s.Expiry())
	_, js := conn(t, srv.ClientURL())
	st, err := bucket(t, js, "fresh").Status(ctxT(t))
	require.NoError(t, err)
	cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	assert.Equal(t, int64(1), cfg.MaxMsgsPerSubject, "History 1")
	assert.Equal(t, jetstream.FileStorage, cfg.Storage)
	assert.Equal(t, 1, cfg.Replicas)
	assert.True(t, cfg.AllowMsgTTL)
	assert.Equal(t, 90*time.Second, cfg.SubjectDeleteMarkerTTL, "LimitMarkerTTL")
	assert.Zero(t, cfg.MaxAge, "no bucket-wide TTL")
}

// Binding to an existing bucket never changes it.
func TestBindDoesNotChangeBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	byHand(t, srv.ClientURL(), jetstream.KeyValueConfig{Bucket: "theirs", Description: "their bucket",
		History: 1, Storage: jetstream.FileStorage, LimitMarkerTTL: 5 * time.Second, MaxBytes: 1 << 20})
	before, err := js.Stream(ctxT(t), "KV_theirs")
	require.NoError(t, err)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "theirs", Replicas: 1, MarkerTTL: time.Hour})
	works(t, s)
	after, err := js.Stream(ctxT(t), "KV_theirs")
	require.NoError(t, err)
	assert.Equal(t, before.CachedInfo().Config, after.CachedInfo().Config)
}

// Bucket configurations that break leases are refused with a clear reason.
func TestBucketConfigRefused(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	for _, tc := range []struct {
		cfg    jetstream.KeyValueConfig
		expiry natsstore.ExpiryMode
		why    string
	}{
		{jetstream.KeyValueConfig{Bucket: "history", History: 5, LimitMarkerTTL: time.Second}, natsstore.ExpiryAuto, "History is 5"},
		{jetstream.KeyValueConfig{Bucket: "bucket_ttl", TTL: time.Hour, LimitMarkerTTL: time.Second}, natsstore.ExpiryAuto, "the bucket has a TTL"},
		{jetstream.KeyValueConfig{Bucket: "memory", Storage: jetstream.MemoryStorage, LimitMarkerTTL: time.Second}, natsstore.ExpiryAuto, "memory storage"},
		{jetstream.KeyValueConfig{Bucket: "tiny", MaxValueSize: 64, LimitMarkerTTL: time.Second}, natsstore.ExpiryAuto, "MaxValueSize 64"},
		{jetstream.KeyValueConfig{Bucket: "no_ttl"}, natsstore.ExpiryServer, "no LimitMarkerTTL"},
	} {
		t.Run(tc.cfg.Bucket, func(t *testing.T) {
			_, err := js.CreateKeyValue(ctxT(t), tc.cfg)
			require.NoError(t, err)
			ctx := openCtx(t)
			_, err = natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
				natsstore.Config{Bucket: tc.cfg.Bucket, Expiry: tc.expiry})
			require.ErrorIs(t, err, natsstore.ErrBucketConfig)
			assert.Contains(t, err.Error(), tc.why)
			require.NoError(t, ctx.Err())
		})
	}

	_, err := natsstore.Dial(openCtx(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
		natsstore.Config{Bucket: "missing", NoCreate: true})
	require.ErrorIs(t, err, natsstore.ErrNoBucket)
}

// oldServer makes a JetStream context look like a server before 2.11
// (JetStream API level 0: no per-message TTLs).
type oldServer struct{ jetstream.JetStream }

func (o oldServer) AccountInfo(ctx context.Context) (*jetstream.AccountInfo, error) {
	info, err := o.JetStream.AccountInfo(ctx)
	if err != nil {
		return nil, err
	}
	c := *info
	c.API.Level = 0
	return &c, nil
}

// Legacy mode is detected from the server and from the bucket, and then
// judges expiry by observation.
func TestLegacyDetection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())

	// A server without per-message TTLs: the bucket is created without
	// LimitMarkerTTL and leases are written without TTL.
	old, err := natsstore.New(openCtx(t), oldServer{js}, natsstore.Config{Bucket: "old_server"})
	require.NoError(t, err)
	defer old.Close()
	assert.Equal(t, natsstore.ExpiryObserved, old.Expiry())
	_, err = natsstore.New(openCtx(t), oldServer{js}, natsstore.Config{Bucket: "old_server2", Expiry: natsstore.ExpiryServer})
	require.ErrorIs(t, err, natsstore.ErrBucketConfig)
	assert.Contains(t, err.Error(), "predates per-message TTLs")
	st, err := bucket(t, js, "old_server").Status(ctxT(t))
	require.NoError(t, err)
	assert.False(t, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.AllowMsgTTL)

	// An existing bucket without LimitMarkerTTL on a current server.
	byHand(t, srv.ClientURL(), jetstream.KeyValueConfig{Bucket: "no_markers", Storage: jetstream.FileStorage})
	a := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "no_markers"})
	b := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "no_markers"})
	assert.Equal(t, natsstore.ExpiryObserved, a.Expiry())

	for _, s := range []*natsstore.Store{old, a} {
		other := b
		if s == old {
			var err error
			other, err = natsstore.New(openCtx(t), oldServer{js}, natsstore.Config{Bucket: "old_server"})
			require.NoError(t, err)
			defer other.Close()
		}
		held := mustAcquire(t, s, claim("job", "owner-a"))
		_, err := s.Renew(ctxT(t), held)
		require.NoError(t, err)
		got, err := other.Acquire(ctxT(t), claim("job", "owner-b"))
		require.NoError(t, err)
		require.False(t, got.Acquired)
		start := time.Now()
		l, failed := awaitAcquire(t, other, claim("job", "owner-b"))
		assert.Positive(t, failed)
		assert.GreaterOrEqual(t, time.Since(start), ttl*9/10, "taken over before a TTL of unchanged revision")
		assert.Greater(t, l.Token, held.Token)
	}

	// Nothing expires at the server: the key is still there.
	e, err := bucket(t, js, "no_markers").Get(ctxT(t), "job")
	require.NoError(t, err)
	assert.NotZero(t, e.Revision())
}

var _ = nats.DefaultURL
