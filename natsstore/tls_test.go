package natsstore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// pki is a throw-away certificate authority with one server and one client
// certificate, written as PEM files.
type pki struct {
	dir                           string
	ca                            *x509.Certificate
	caKey                         *ecdsa.PrivateKey
	caFile                        string
	serverCert                    tls.Certificate
	clientCertFile, clientKeyFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aster test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	require.NoError(t, err)
	p.ca, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)

	srvDER, srvKey := p.issue(t, 2, x509.ExtKeyUsageServerAuth)
	p.serverCert = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := p.issue(t, 3, x509.ExtKeyUsageClientAuth)
	p.clientCertFile = p.write(t, "client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	require.NoError(t, err)
	p.clientKeyFile = p.write(t, "client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func (p *pki) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	return der, key
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// mutualTLS returns the option that makes a server require TLS with client
// certificates signed by p's CA.
func mutualTLS(p *pki) natstest.Option {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return natstest.WithOptions(func(o *server.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{p.serverCert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		}
	})
}

// A server that requires TLS with client certificates.
func TestDialTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	srv := natstest.Start(t, mutualTLS(p))
	works(t, dial(t, srv.ClientURL(), natsstore.Config{},
		natsstore.DialOptions{CAFile: p.caFile, CertFile: p.clientCertFile, KeyFile: p.clientKeyFile}))

	// Without a client certificate the connection is refused: a
	// configuration error that says what is missing, at once.
	ctx := openCtx(t)
	_, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, CAFile: p.caFile},
		natsstore.Config{})
	requireField(t, err, "CertFile", "requires a client certificate")
	require.NoError(t, ctx.Err())

	// A server certificate no configured CA signed.
	other := newPKI(t)
	_, err = natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, CAFile: other.caFile,
		CertFile: p.clientCertFile, KeyFile: p.clientKeyFile}, natsstore.Config{})
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
	p := newPKI(t)
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
		{natsstore.DialOptions{CAFile: p.caFile, CertFile: missing, KeyFile: p.clientKeyFile}, "CertFile"},
		{natsstore.DialOptions{CAFile: p.caFile, CertFile: p.clientCertFile, KeyFile: missing}, "CertFile"},
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
	p := newPKI(t)
	srv := natstest.Start(t, mutualTLS(p))
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	other := newPKI(t)
	works(t, dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{
		TLS:      &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		CAFile:   other.caFile,
		CertFile: p.clientCertFile, KeyFile: p.clientKeyFile,
	}))
}
