package natsstore

import (
	"crypto/x509"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// protoErr is how nats.go reports a server's -ERR line: "nats: " and the
// text, not always wrapping a sentinel.
func protoErr(text string) error { return errors.New("nats: " + text) }

// permErr is how nats.go reports a permissions violation.
func permErr(text string) error {
	return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, text)
}

// The messages below are nats-server 2.15.2's (server/client.go), as
// nats.go 1.55.0 reports them.
func TestConnectErrorClasses(t *testing.T) {
	t.Parallel()
	const (
		config = "config"
		auth   = "auth"
		gone   = "unavailable"
	)
	for _, tc := range []struct {
		name          string
		err           error
		certRequested bool
		class         string
		field         string // for config
	}{
		{"authorization violation", protoErr("Authorization Violation"), false, auth, ""},
		{"authorization sentinel", nats.ErrAuthorization, false, auth, ""},
		{"user expired", protoErr("User Authentication Expired"), false, auth, ""},
		{"user expired sentinel", nats.ErrAuthExpired, false, auth, ""},
		{"user revoked", protoErr("User Authentication Revoked"), false, auth, ""},
		{"account expired", protoErr("Account Authentication Expired"), false, auth, ""},
		{"no client certificate, TLS 1.3", fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.EPIPE), true, config, "CertFile"},
		{"no client certificate, alert", errors.New("remote error: tls: certificate required"), true, config, "CertFile"},
		{"unknown CA", fmt.Errorf("%w: %w", nats.ErrTLS, x509.UnknownAuthorityError{}), false, config, "CAFile"},
		{"wrong host", fmt.Errorf("%w: %w", nats.ErrTLS, x509.HostnameError{Host: "nats.example"}), false, config, "TLS"},
		{"expired certificate", fmt.Errorf("%w: %w", nats.ErrTLS, x509.CertificateInvalidError{Reason: x509.Expired}), false, config, "TLS"},
		{"server without TLS", nats.ErrSecureConnWanted, false, config, "TLS"},
		{"refused", fmt.Errorf("dial tcp 127.0.0.1:4222: %w", syscall.ECONNREFUSED), false, gone, ""},
		{"no servers", nats.ErrNoServers, false, gone, ""},
		{"timeout", nats.ErrTimeout, false, gone, ""},
		{"broken pipe without a certificate request", fmt.Errorf("write: %w", syscall.EPIPE), false, gone, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := connectError("nats://127.0.0.1:4222", tc.certRequested, tc.err)
			switch tc.class {
			case config:
				var fe *lease.FieldError
				require.ErrorAs(t, got, &fe)
				assert.Equal(t, tc.field, fe.Field)
				assert.ErrorIs(t, got, lease.ErrInvalid)
				assert.NotErrorIs(t, got, lease.ErrUnavailable)
			case auth:
				assert.ErrorIs(t, got, ErrAuthentication)
				assert.NotErrorIs(t, got, lease.ErrInvalid)
				assert.NotErrorIs(t, got, lease.ErrUnavailable)
			case gone:
				assert.ErrorIs(t, got, lease.ErrUnavailable)
				assert.ErrorIs(t, got, tc.err)
				assert.NotErrorIs(t, got, ErrAuthentication)
				assert.NotErrorIs(t, got, lease.ErrInvalid)
			}
		})
	}
}

func TestParseViolation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want violation
		ok   bool
	}{
		{permErr(`Permissions Violation for Publish to "$KV.leases.job"`), violation{subject: "$KV.leases.job"}, true},
		{permErr(`Permissions Violation for Subscription to "_INBOX.abc.*"`), violation{subscribe: true, subject: "_INBOX.abc.*"}, true},
		{permErr(`Permissions Violation for Subscription to "_INBOX.abc.*" using queue "q"`), violation{subscribe: true, subject: "_INBOX.abc.*"}, true},
		{permErr(`Permissions Violation for Subscription to "_INBOX.abc.*" (sid "1")`), violation{subscribe: true, subject: "_INBOX.abc.*"}, true},
		{permErr(`Permissions Violation for Publish with Reply of "_INBOX.x.1"`), violation{reply: true, subject: "_INBOX.x.1"}, true},
		{protoErr(`Permissions Violation for Publish to "$KV.leases.job"`), violation{}, false}, // not nats.go's sentinel
		{protoErr("Authorization Violation"), violation{}, false},
		{nil, violation{}, false},
	} {
		got, ok := parseViolation(tc.err)
		assert.Equal(t, tc.ok, ok, "%v", tc.err)
		assert.Equal(t, tc.want, got, "%v", tc.err)
	}
}

func FuzzParseViolation(f *testing.F) {
	f.Add(`Permissions Violation for Publish to "$KV.leases.job"`)
	f.Add(`Permissions Violation for Subscription to "_INBOX.abc.*" using queue "q"`)
	f.Add(`Permissions Violation for Publish with Reply of "_INBOX.x"`)
	f.Add(`Permissions Violation for Publish to ""`)
	f.Fuzz(func(t *testing.T, text string) {
		v, ok := parseViolation(permErr(text))
		if !ok {
			return
		}
		// A parsed violation names a subject found in the message, and one
		// kind at most.
		assert.Contains(t, text, `"`+v.subject+`"`)
		assert.False(t, v.subscribe && v.reply)
	})
}

func TestIsAuthFailure(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired,
		protoErr("Authorization Violation"), protoErr("authorization violation"),
		protoErr("User Authentication Expired"), protoErr("User Authentication Revoked"),
		protoErr("Account Authentication Expired"),
		fmt.Errorf("connect: %w", nats.ErrAuthorization),
	} {
		assert.True(t, isAuthFailure(err), "%v", err)
	}
	for _, err := range []error{
		nil, nats.ErrTimeout, nats.ErrNoServers, permErr(`Permissions Violation for Publish to "x"`),
		protoErr("Maximum Connections Exceeded"),
	} {
		assert.False(t, isAuthFailure(err), "%v", err)
	}
}

// An account with max_bytes_required refuses a bucket without a size
// limit with API error 10113: that is Config.MaxBytes to set.
func TestOpenErrorMaxBytesRequired(t *testing.T) {
	t.Parallel()
	apiErr := &jetstream.APIError{Code: 400, ErrorCode: 10113, Description: "account requires a stream config to have max bytes set"}
	err := openError(Config{Bucket: "leases"}, fmt.Errorf("natsstore: create bucket %q: %w", "leases", apiErr))
	var fe *lease.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "MaxBytes", fe.Field)
	assert.Contains(t, err.Error(), "max_bytes_required")

	other := fmt.Errorf("natsstore: create bucket: %w", &jetstream.APIError{Code: 500, ErrorCode: 10049, Description: "stream create failed"})
	assert.Equal(t, other, openError(Config{}, other))
}
