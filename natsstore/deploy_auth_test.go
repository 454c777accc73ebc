package natsstore_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// credsRig is an operator-mode server and a service whose credentials
// file expires soon, with a long lease held.
type credsRig struct {
	srv   *natstest.Server
	app   *natstest.Account
	creds string
	user  string // the public key of the user in creds
	rec   *recorder
	store *natsstore.Store
	held  lease.Lease
}

// jwtLife is how long the first credentials are valid. JWT expiry is in
// whole seconds: the server ends the connection one to two seconds after.
const jwtLife = 2 * time.Second

func newCredsRig(t *testing.T, life time.Duration) *credsRig {
	t.Helper()
	op := natstest.NewOperator(t)
	r := &credsRig{app: op.Account(t, "APP", nil), rec: newRecorder()}
	r.srv = natstest.Start(t, op.Trusted())
	r.creds = filepath.Join(t.TempDir(), "svc.creds")
	r.user = r.app.WriteCreds(t, r.creds, func(uc *jwt.UserClaims) {
		if life > 0 {
			uc.Expires = time.Now().Add(life).Unix()
		}
	})
	r.store = dial(t, r.srv.ClientURL(), r.rec.config(natsstore.Config{}), natsstore.DialOptions{CredentialsFile: r.creds})
	r.held = mustAcquire(t, r.store, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
	return r
}

// renews checks that the held lease can be renewed, with its token, once
// the store has seen the connection back (it learns of it a moment after
// the reconnect is logged).
func (r *credsRig) renews(t *testing.T) {
	t.Helper()
	var (
		l   lease.Lease
		err error
	)
	require.Eventually(t, func() bool {
		l, err = r.store.Renew(ctxT(t), r.held)
		require.NotErrorIs(t, err, natsstore.ErrAuthentication)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "renew: %v", err)
	assert.Equal(t, r.held.Token, l.Token)
}

// The credentials expire, and the server refuses them at every reconnect:
// operations fail with ErrAuthentication (not a silent closed connection),
// an event says so, and the store picks up the file the operator replaces.
func TestCredentialsReplacedAfterExpiry(t *testing.T) {
	t.Parallel()
	r := newCredsRig(t, jwtLife)

	failed := waitEvent[natsstore.AuthenticationFailed](t, r.rec)
	assert.Contains(t, strings.ToLower(failed.Reason), "authorization violation")
	_, err := r.store.Renew(ctxT(t), r.held)
	require.ErrorIs(t, err, natsstore.ErrAuthentication)
	require.ErrorIs(t, err, lease.ErrUnavailable, "a renewal is retried until its deadline")
	_, err = r.store.Watch(ctxT(t), "job")
	require.ErrorIs(t, err, natsstore.ErrAuthentication)

	r.app.WriteCreds(t, r.creds, nil)
	recovered := waitEvent[natsstore.AuthenticationRecovered](t, r.rec)
	assert.Positive(t, recovered.Refusals)
	r.renews(t)
}

// Credentials replaced before they expire: when the server ends the
// expired connection, the reconnect reads the new file and is accepted at
// once; nothing is refused.
func TestCredentialsReplacedBeforeExpiry(t *testing.T) {
	t.Parallel()
	r := newCredsRig(t, jwtLife)
	r.app.WriteCreds(t, r.creds, nil)

	r.rec.waitLog(t, "credentials expired or were revoked")
	r.rec.waitLog(t, "reconnected to NATS")
	r.renews(t)
	assert.Zero(t, r.rec.countLogs("refuses this connection's credentials"))
}

// Revoked credentials: the server ends the connection and refuses the
// user; new credentials (a new user) are picked up.
func TestCredentialsRevoked(t *testing.T) {
	t.Parallel()
	r := newCredsRig(t, 0)
	r.app.Update(t, func(ac *jwt.AccountClaims) { ac.Revoke(r.user) }, r.srv)

	waitEvent[natsstore.AuthenticationFailed](t, r.rec)
	_, err := r.store.Acquire(ctxT(t), claim("other", "owner-a"))
	require.ErrorIs(t, err, natsstore.ErrAuthentication)

	r.app.WriteCreds(t, r.creds, nil)
	waitEvent[natsstore.AuthenticationRecovered](t, r.rec)
	r.renews(t)
}
