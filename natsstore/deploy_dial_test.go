package natsstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// With RetryConnect, a service may start before its server: Dial keeps
// trying until the server is up.
func TestDialRetryConnect(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	srv.Shutdown() // the service starts first

	rec := newRecorder()
	type result struct {
		s   *natsstore.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()},
			ReconnectWait: 20 * time.Millisecond, RetryConnect: true}, rec.config(natsstore.Config{}))
		done <- result{s, err}
	}()
	rec.waitLog(t, "cannot connect to NATS yet; retrying")
	srv.Restart(t)
	r := <-done
	require.NoError(t, r.err)
	defer r.s.Close()
	works(t, r.s)
}

// RetryConnect retries until ctx ends, and then says why it could not
// connect; it never retries a configuration error.
func TestDialRetryConnectGivesUp(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	url := srv.ClientURL()

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}, User: "alice", Password: "wrong",
		ReconnectWait: 20 * time.Millisecond, RetryConnect: true}, natsstore.Config{})
	require.ErrorIs(t, err, natsstore.ErrAuthentication, "refused credentials are retried, and reported")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	srv.Shutdown()
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}, ReconnectWait: 20 * time.Millisecond,
		RetryConnect: true}, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx = openCtx(t)
	_, err = natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}, RetryConnect: true,
		CredentialsFile: filepath.Join(t.TempDir(), "missing.creds")}, natsstore.Config{})
	require.ErrorIs(t, err, lease.ErrInvalid)
	require.NoError(t, ctx.Err(), "a configuration error is not retried")
}

// A user who may receive only on an inbox prefix of its own.
func TestDialInboxPrefix(t *testing.T) {
	t.Parallel()
	top := natstest.Topology{InboxPrefix: "_INBOX_B"}
	pub, sub := leastPrivilege("leases", top)
	srv := natstest.Start(t, natstest.WithUser("admin", "a"), natstest.WithRestrictedUser("svc", "s", pub, sub))
	cfg := natsstore.Config{Bucket: "leases"}
	dial(t, srv.ClientURL(), cfg, natsstore.DialOptions{User: "admin", Password: "a"})

	ctx := openCtx(t)
	_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "svc", Password: "s"}, cfg)
	require.ErrorIs(t, err, natsstore.ErrPermission, "replies on _INBOX are refused")
	require.NoError(t, ctx.Err())

	d := natsstore.DialOptions{User: "svc", Password: "s", InboxPrefix: top.InboxPrefix}
	handover(t, dial(t, srv.ClientURL(), cfg, d), dial(t, srv.ClientURL(), cfg, d))

	_, err = natsstore.Dial(ctx, natsstore.DialOptions{InboxPrefix: "_INBOX.>"}, cfg)
	require.ErrorIs(t, err, lease.ErrInvalid)
}

// An account that requires a size limit on every stream: without
// Config.MaxBytes the store says so; with it, it creates the bucket with
// that limit.
func TestMaxBytesRequired(t *testing.T) {
	t.Parallel()
	op := natstest.NewOperator(t)
	app := op.Account(t, "APP", func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits.MaxBytesRequired = true })
	srv := natstest.Start(t, op.Trusted())
	creds := filepath.Join(t.TempDir(), "svc.creds")
	app.WriteCreds(t, creds, nil)
	d := natsstore.DialOptions{URLs: []string{srv.ClientURL()}, CredentialsFile: creds}

	ctx := openCtx(t)
	_, err := natsstore.Dial(ctx, d, natsstore.Config{Bucket: "leases"})
	requireField(t, err, "MaxBytes", "max_bytes_required")
	require.NoError(t, ctx.Err())

	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "leases", MaxBytes: 1 << 20}, d)
	works(t, s)
	_, js := conn(t, srv.ClientURL(), nats.UserCredentials(creds))
	st, err := bucket(t, js, "leases").Status(ctxT(t))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes)
}

// A full bucket refuses writes: new keys, and (docs/nats.md warns) the
// renewals and releases of held keys that need more room, such as a first
// renewal, which carries the token.
func TestMaxBytesFullBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "small", MaxBytes: 4096})
	var (
		held lease.Lease // the last key that fitted
		err  error
	)
	for n := 0; err == nil; n++ {
		require.Less(t, n, 1000, "4 KiB never filled up")
		var a lease.Acquisition
		a, err = s.Acquire(ctxT(t), lease.Claim{LeaseID: fmt.Sprintf("k%d", n), OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
		if err == nil {
			held = a.Lease
		}
	}
	require.ErrorIs(t, err, lease.ErrUnavailable)
	assert.Contains(t, err.Error(), "maximum bytes exceeded")

	_, err = s.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrUnavailable, "the renewal carries the token: it is larger")
	assert.Contains(t, err.Error(), "maximum bytes exceeded")
}
