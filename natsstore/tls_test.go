package natsstore_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A server that requires TLS with client certificates.
func TestDialTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.MutualTLS())
	works(t, dial(t, srv.ClientURL(), natsstore.Config{},
		natsstore.DialOptions{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}))

	// Without a client certificate the connection is refused: a
	// configuration error that says what is missing, at once.
	ctx := openCtx(t)
	_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, CAFile: p.CAFile},
		natsstore.Config{})
	requireField(t, err, "CertFile", "requires a client certificate")
	require.NoError(t, ctx.Err())

	// A server certificate no configured CA signed.
	other := natstest.NewPKI(t)
	_, err = natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, CAFile: other.CAFile,
		CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}, natsstore.Config{})
	requireField(t, err, "CAFile", "not signed by a CA this client trusts")
}

// requireField checks that err is a configuration error of field whose
// message contains text.
func requireField(t *testing.T, err error, field, text string) {
	t.Helper()
	require.ErrorIs(t, err, lease.ErrInvalid)
	require.NotErrorIs(t, err, lease.ErrUnavailable)
	var fe *lease.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, field, fe.Field)
	assert.Contains(t, err.Error(), text)
}

// A missing or unreadable file is a configuration error, not a server
// that cannot be reached.
func TestDialMissingFiles(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	missing := filepath.Join(t.TempDir(), "missing")
	garbage := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte("not a credentials file"), 0o600))
	for _, tc := range []struct {
		d     natsstore.DialOptions
		field string
	}{
		{natsstore.DialOptions{CredentialsFile: missing}, "CredentialsFile"},
		{natsstore.DialOptions{CredentialsFile: garbage}, "CredentialsFile"},
		{natsstore.DialOptions{NKeySeedFile: missing}, "NKeySeedFile"},
		{natsstore.DialOptions{CAFile: missing}, "CAFile"},
		{natsstore.DialOptions{CAFile: garbage}, "CAFile"},
		{natsstore.DialOptions{CAFile: p.CAFile, CertFile: missing, KeyFile: p.ClientKeyFile}, "CertFile"},
		{natsstore.DialOptions{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: missing}, "CertFile"},
	} {
		tc.d.URLs = []string{"nats://127.0.0.1:1"}
		_, err := natsstore.Dial(openCtx(t), tc.d, natsstore.Config{})
		requireField(t, err, tc.field, "")
	}
}

// CAFile adds its CAs to those of DialOptions.TLS, as documented; it does
// not replace them.
func TestDialCAFileAddsToRootCAs(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.MutualTLS())
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	other := natstest.NewPKI(t)
	works(t, dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{
		TLS:      &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		CAFile:   other.CAFile,
		CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile,
	}))
}
