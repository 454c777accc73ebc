package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// frozenRenew renews l while the path to the server is frozen: a plain
// timeout, the connection still up.
func frozenRenew(t *testing.T, p *natstest.Proxy, s *natsstore.Store, l lease.Lease) error {
	t.Helper()
	p.Freeze(true)
	defer p.Freeze(false)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Renew(ctx, l)
	require.Error(t, err)
	return err
}

// A user without the optional CONSUMER.DELETE: stopping a watch is
// refused, which the connection keeps as its last error. A later timeout
// is a timeout, not a permissions error.
func TestOldPermissionErrorNotBlamed(t *testing.T) {
	t.Parallel()
	pub, sub := leastPrivilege("leases", natstest.Topology{})
	var withoutDelete []string
	for _, s := range pub {
		if s != "$JS.API.CONSUMER.DELETE.KV_leases.>" {
			withoutDelete = append(withoutDelete, s)
		}
	}
	srv := natstest.Start(t, natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", withoutDelete, sub))
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "admin", Password: "a"})
	p := natstest.StartProxy(t, srv.ClientURL())
	rec := newRecorder()
	s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{p.URL()}, User: "svc", Password: "s"},
		rec.config(natsstore.Config{Bucket: "leases", CloseTimeout: 100 * time.Millisecond}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() }) // the watch's consumer cannot be deleted: Close says so
	l := mustAcquire(t, s, claim("job", "owner-a"))

	ctx, cancel := context.WithCancel(t.Context())
	events, err := s.Watch(ctx, "job")
	require.NoError(t, err)
	<-events
	cancel() // the watch stops: its consumer's deletion is refused
	rec.waitLog(t, "CONSUMER.DELETE")

	err = frozenRenew(t, p, s, l)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, lease.ErrUnavailable)
	assert.NotErrorIs(t, err, natsstore.ErrPermission)
}

// A violation of a subject an operation uses is that operation's error,
// and no later one's: a user without CONSUMER.CREATE cannot watch, and a
// later timeout is a timeout.
func TestPermissionErrorBlamedOnce(t *testing.T) {
	t.Parallel()
	pub, sub := leastPrivilege("leases", natstest.Topology{})
	var withoutCreate []string
	for _, s := range pub {
		if s != "$JS.API.CONSUMER.CREATE.KV_leases.>" {
			withoutCreate = append(withoutCreate, s)
		}
	}
	srv := natstest.Start(t, natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", withoutCreate, sub))
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "admin", Password: "a"})
	p := natstest.StartProxy(t, srv.ClientURL())
	s := dial(t, p.URL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "svc", Password: "s"})
	l := mustAcquire(t, s, claim("job", "owner-a"))

	ctx := openCtx(t)
	_, err := s.Watch(ctx, "job")
	require.ErrorIs(t, err, natsstore.ErrPermission)
	assert.Contains(t, err.Error(), "CONSUMER.CREATE")
	require.NoError(t, ctx.Err(), "refused at once")

	err = frozenRenew(t, p, s, l)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, lease.ErrUnavailable)
	assert.NotErrorIs(t, err, natsstore.ErrPermission)
}

// A write the server does not permit is dropped, and the server tells only
// the connection: the write sees a timeout. It is an ErrPermission error
// whatever the call's time (it once depended on whether the call's last
// read back timed out: with time to spare it used up its attempts and
// blamed the stream), and the key stays free.
func TestDeniedWriteIsAPermissionError(t *testing.T) {
	t.Parallel()
	pub, sub := leastPrivilege("leases", natstest.Topology{})
	srv := natstest.Start(t, natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", pub, sub),
		natstest.WithOptions(func(o *server.Options) {
			for _, u := range o.Users {
				if u.Username == "svc" {
					u.Permissions.Publish.Deny = []string{"$KV.leases.job"}
				}
			}
		}))
	admin := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "admin", Password: "a"})
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases"}, natsstore.DialOptions{User: "svc", Password: "s"})

	for _, limit := range []time.Duration{200 * time.Millisecond, time.Second, 2 * time.Second} {
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		_, err := s.Acquire(ctx, claim("job", "owner-a"))
		cancel()
		require.ErrorIs(t, err, natsstore.ErrPermission, "within %v", limit)
		assert.ErrorIs(t, err, lease.ErrUnavailable)
		assert.ErrorContains(t, err, `allow the user to publish to "$KV.leases.job"`)
	}
	mustAcquire(t, s, claim("other", "owner-a")) // other keys are written
	a, err := admin.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	assert.True(t, a.Acquired, "nothing of the denied writes was stored")
}
