package natstest

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
)

// PKI is a throw-away certificate authority with one server certificate
// (for 127.0.0.1) and one client certificate, valid for an hour and
// written as PEM files in a t.TempDir().
//
//	p := natstest.NewPKI(t)
//	srv := natstest.Start(t, p.MutualTLS())
//	nc, err := nats.Connect(srv.ClientURL(), nats.RootCAs(p.CAFile),
//		nats.ClientCert(p.ClientCertFile, p.ClientKeyFile))
type PKI struct {
	// CA is the authority's certificate; CAFile holds it.
	CA     *x509.Certificate
	CAFile string
	// ServerCert is the server's certificate and key, signed by CA.
	ServerCert tls.Certificate
	// ClientCertFile and ClientKeyFile hold a client certificate signed by
	// CA, and its key.
	ClientCertFile, ClientKeyFile string

	dir   string
	caKey *ecdsa.PrivateKey
}

// NewPKI creates a certificate authority and issues a server and a client
// certificate.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{dir: t.TempDir()}
	var err error
	p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aster test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	must(t, err)
	p.CA, err = x509.ParseCertificate(der)
	must(t, err)
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", der)

	srvDER, srvKey := p.issue(t, 2, x509.ExtKeyUsageServerAuth)
	p.ServerCert = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := p.issue(t, 3, x509.ExtKeyUsageClientAuth)
	p.ClientCertFile = p.write(t, "client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	must(t, err)
	p.ClientKeyFile = p.write(t, "client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func (p *PKI) issue(t testing.TB, serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.caKey)
	must(t, err)
	return der, key
}

func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// TLS returns the option that makes a server require TLS with p's server
// certificate; clients present no certificate.
func (p *PKI) TLS() Option {
	return WithOptions(func(o *server.Options) {
		o.TLS = true
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{p.ServerCert}, MinVersion: tls.VersionTLS12}
	})
}

// MutualTLS returns the option that makes a server require TLS with client
// certificates signed by p's CA.
func (p *PKI) MutualTLS() Option {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	return WithOptions(func(o *server.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{p.ServerCert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		}
	})
}
