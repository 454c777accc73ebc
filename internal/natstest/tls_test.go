package natstest_test

import (
	"crypto/x509"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.TLS())
	nc, _ := connect(t, srv.ClientURL(), nats.RootCAs(p.CAFile))
	assert.True(t, nc.TLSRequired())

	_, err := nats.Connect(srv.ClientURL())
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "the server's certificate is signed by p's CA only")
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.MutualTLS())
	connect(t, srv.ClientURL(), nats.RootCAs(p.CAFile), nats.ClientCert(p.ClientCertFile, p.ClientKeyFile))

	_, err := nats.Connect(srv.ClientURL(), nats.RootCAs(p.CAFile))
	require.Error(t, err, "a client certificate is required")

	other := natstest.NewPKI(t)
	_, err = nats.Connect(srv.ClientURL(), nats.RootCAs(p.CAFile), nats.ClientCert(other.ClientCertFile, other.ClientKeyFile))
	require.Error(t, err, "signed by p's CA")
}
