package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

// The connection flags and their environment variables against servers
// that require credentials or TLS: `aster leases` lists a lease held in the
// default bucket when they are right, and says what to fix when they are
// wrong or missing.

// authCase is one run of `aster leases` against a secured server.
type authCase struct {
	name string
	env  map[string]string // besides NATS_URL
	args []string          // after "leases"
	// want is what stderr says when the run fails (exit status 1); nil
	// when it succeeds.
	want []string
}

// holdLease creates the default bucket on url, connecting as d says, and
// holds the lease billing.outbox in it.
func holdLease(t *testing.T, url string, d natsstore.DialOptions) {
	t.Helper()
	take(t, store(t, url, natsstore.DefaultBucket, d), "billing.outbox", "pod-a", nil)
}

// runAuth runs every case, in parallel, with NATS_URL set to url. No run
// prints a secret.
func runAuth(t *testing.T, url string, secrets []string, cases []authCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"NATS_URL": url}
			maps.Copy(env, tc.env)
			r := aster(t, env, append([]string{"leases"}, tc.args...)...)
			for _, s := range secrets {
				assert.NotContains(t, r.stdout+r.stderr, s, "secrets are never printed")
			}
			if tc.want == nil {
				require.Equal(t, 0, r.code, r.stderr)
				assert.Contains(t, r.stdout, "billing.outbox")
				return
			}
			assert.Equal(t, 1, r.code, r.stdout)
			assert.True(t, strings.HasPrefix(r.stderr, "aster leases: "), r.stderr)
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}
		})
	}
}

// refused is what the command says when the server refuses the
// credentials.
var refused = []string{"the server refused the credentials: ", "(check --creds, --nkey, --user/--password or --token)"}

func writeFile(t *testing.T, name, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(contents), 0o600))
	return path
}

// Operator mode: a user JWT and its seed in a .creds file.
func TestCredsFile(t *testing.T) {
	t.Parallel()
	op := natstest.NewOperator(t)
	app := op.Account(t, "APP", nil)
	srv := natstest.Start(t, op.Trusted())
	dir := t.TempDir()
	creds := filepath.Join(dir, "ops.creds")
	app.WriteCreds(t, creds, nil)
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{CredentialsFile: creds})

	stranger := filepath.Join(dir, "stranger.creds") // an account the server does not trust
	natstest.NewOperator(t).Account(t, "OTHER", nil).WriteCreds(t, stranger, nil)
	expired := filepath.Join(dir, "expired.creds")
	app.WriteCreds(t, expired, func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(-time.Minute).Unix() })
	missing := filepath.Join(dir, "missing.creds")
	garbage := writeFile(t, "garbage.creds", "not a credentials file")

	runAuth(t, srv.ClientURL(), nil, []authCase{
		{name: "flag", args: []string{"--creds", creds}},
		{name: "env", env: map[string]string{"NATS_CREDS": creds}},
		{name: "none", want: refused},
		{name: "untrusted account", args: []string{"--creds", stranger}, want: refused},
		{name: "untrusted account env", env: map[string]string{"NATS_CREDS": stranger}, want: refused},
		{name: "expired", args: []string{"--creds", expired}, want: refused},
		{name: "missing file", args: []string{"--creds", missing},
			want: []string{"aster leases: --creds (NATS_CREDS): open " + missing + ": no such file or directory"}},
		{name: "not a credentials file", env: map[string]string{"NATS_CREDS": garbage},
			want: []string{"aster leases: --creds (NATS_CREDS): " + garbage + ": no nkey seed in it"}},
	})
}

// An nkey seed file, for a server that lists the user's public key.
func TestNKeyFile(t *testing.T) {
	t.Parallel()
	seedFile := func(name string) (file, pub string) {
		kp, err := nkeys.CreateUser()
		require.NoError(t, err)
		pub, err = kp.PublicKey()
		require.NoError(t, err)
		seed, err := kp.Seed()
		require.NoError(t, err)
		return writeFile(t, name, string(seed)), pub
	}
	seed, pub := seedFile("ops.nk")
	other, _ := seedFile("other.nk")
	srv := natstest.Start(t, natstest.WithNKey(pub))
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{NKeySeedFile: seed})
	missing := filepath.Join(t.TempDir(), "missing.nk")

	runAuth(t, srv.ClientURL(), nil, []authCase{
		{name: "flag", args: []string{"--nkey", seed}},
		{name: "env", env: map[string]string{"NATS_NKEY": seed}},
		{name: "none", want: refused},
		{name: "unknown key", args: []string{"--nkey", other}, want: refused},
		{name: "unknown key env", env: map[string]string{"NATS_NKEY": other}, want: refused},
		{name: "missing file", args: []string{"--nkey", missing},
			want: []string{"aster leases: --nkey (NATS_NKEY): ", "open " + missing + ": no such file or directory"}},
	})
}

func TestToken(t *testing.T) {
	t.Parallel()
	const token, wrong = "tok-s3cret", "tok-wrong"
	srv := natstest.Start(t, natstest.WithToken(token))
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{Token: token})
	hostPort := strings.TrimPrefix(srv.ClientURL(), "nats://")

	runAuth(t, srv.ClientURL(), []string{wrong}, []authCase{
		{name: "flag", args: []string{"--token", token}},
		{name: "env", env: map[string]string{"NATS_TOKEN": token}},
		{name: "in the URL", args: []string{"--server", "nats://" + token + "@" + hostPort}},
		{name: "none", want: refused},
		{name: "wrong", args: []string{"--token", wrong}, want: refused},
		{name: "wrong env", env: map[string]string{"NATS_TOKEN": wrong}, want: refused},
		{name: "wrong in the URL", env: map[string]string{"NATS_URL": "nats://" + wrong + "@" + hostPort},
			want: append([]string{"connect to nats://xxxxx@" + hostPort + ": "}, refused...)},
	})
}

func TestUserPassword(t *testing.T) {
	t.Parallel()
	const password, wrong = "pw-s3cret", "pw-wrong"
	srv := natstest.Start(t, natstest.WithUser("ops", password))
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{User: "ops", Password: password})
	hostPort := strings.TrimPrefix(srv.ClientURL(), "nats://")

	runAuth(t, srv.ClientURL(), []string{wrong}, []authCase{
		{name: "flags", args: []string{"--user", "ops", "--password", password}},
		{name: "env", env: map[string]string{"NATS_USER": "ops", "NATS_PASSWORD": password}},
		{name: "in the URL", args: []string{"-s", "nats://ops:" + password + "@" + hostPort}},
		{name: "none", want: refused},
		{name: "wrong password", args: []string{"--user", "ops", "--password", wrong}, want: refused},
		{name: "wrong password env", env: map[string]string{"NATS_USER": "ops", "NATS_PASSWORD": wrong}, want: refused},
		{name: "unknown user", args: []string{"--user", "nobody", "--password", password}, want: refused},
		{name: "wrong in the URL", args: []string{"-s", "nats://ops:" + wrong + "@" + hostPort},
			want: append([]string{"connect to nats://ops:xxxxx@" + hostPort + ": "}, refused...)},
	})

	r := aster(t, map[string]string{"NATS_URL": "nats://ops:" + password + "@" + hostPort}, "help", "leases")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "(default nats://ops:xxxxx@"+hostPort+")")
	assert.NotContains(t, r.stdout, password, "secrets are never printed")
}

// untrustedCA is what the command says of a server certificate that no CA
// it was given signed.
var untrustedCA = []string{"the server's certificate is not signed by a CA this client trusts: " +
	"pass the CA that signed it with --tlsca (NATS_CA)"}

// A server that requires TLS, with a certificate of a private CA.
func TestTLSCA(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.TLS())
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{CAFile: p.CAFile})
	other := natstest.NewPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	garbage := writeFile(t, "garbage.pem", "not a certificate")

	runAuth(t, srv.ClientURL(), nil, []authCase{
		{name: "flag", args: []string{"--tlsca", p.CAFile}},
		{name: "env", env: map[string]string{"NATS_CA": p.CAFile}},
		{name: "tls URL", args: []string{"--tlsca", p.CAFile, "-s", strings.Replace(srv.ClientURL(), "nats:", "tls:", 1)}},
		{name: "none", want: untrustedCA},
		{name: "another CA", args: []string{"--tlsca", other.CAFile}, want: untrustedCA},
		{name: "another CA env", env: map[string]string{"NATS_CA": other.CAFile}, want: untrustedCA},
		{name: "missing file", args: []string{"--tlsca", missing},
			want: []string{"aster leases: --tlsca (NATS_CA): open " + missing + ": no such file or directory"}},
		{name: "not a certificate", env: map[string]string{"NATS_CA": garbage},
			want: []string{"aster leases: --tlsca (NATS_CA): " + garbage + ": no PEM certificate in it"}},
	})

	// A server without TLS.
	plain := natstest.Start(t)
	r := aster(t, map[string]string{"NATS_URL": plain.ClientURL(), "NATS_CA": p.CAFile}, "leases")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "aster leases: connect to "+plain.ClientURL()+": the server does not offer TLS, and "+
		"--tlsca or --tlscert (NATS_CA, NATS_CERT) asks for it: drop them, or connect to a server with TLS")
}

// A server that requires TLS with client certificates of its CA.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t)
	srv := natstest.Start(t, p.MutualTLS())
	holdLease(t, srv.ClientURL(), natsstore.DialOptions{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile})
	other := natstest.NewPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	noCert := []string{"the server requires a client certificate (mutual TLS) and none was given: " +
		"pass one with --tlscert and --tlskey (NATS_CERT, NATS_KEY)"}

	runAuth(t, srv.ClientURL(), nil, []authCase{
		{name: "flags", args: []string{"--tlsca", p.CAFile, "--tlscert", p.ClientCertFile, "--tlskey", p.ClientKeyFile}},
		{name: "env", env: map[string]string{"NATS_CA": p.CAFile, "NATS_CERT": p.ClientCertFile, "NATS_KEY": p.ClientKeyFile}},
		{name: "no client certificate", args: []string{"--tlsca", p.CAFile}, want: noCert},
		{name: "no client certificate env", env: map[string]string{"NATS_CA": p.CAFile}, want: noCert},
		{name: "no CA", args: []string{"--tlscert", p.ClientCertFile, "--tlskey", p.ClientKeyFile}, want: untrustedCA},
		{name: "certificate of another CA", args: []string{"--tlsca", p.CAFile, "--tlscert", other.ClientCertFile,
			"--tlskey", other.ClientKeyFile},
			want: []string{"the server did not accept the client certificate of --tlscert (NATS_CERT): " +
				"is it signed by a CA the server trusts, and still valid?"}},
		{name: "key of another certificate", env: map[string]string{"NATS_CA": p.CAFile, "NATS_CERT": p.ClientCertFile,
			"NATS_KEY": other.ClientKeyFile},
			want: []string{"aster leases: --tlscert and --tlskey (NATS_CERT, NATS_KEY): tls: private key does not match public key"}},
		{name: "missing certificate", args: []string{"--tlsca", p.CAFile, "--tlscert", missing, "--tlskey", p.ClientKeyFile},
			want: []string{"aster leases: --tlscert and --tlskey (NATS_CERT, NATS_KEY): open " + missing}},
	})
}

// With TLS 1.3, a server that requires a client certificate and gets none
// may end the connection before it says so: the error is a broken pipe or
// an EOF. That the server asked for a certificate says what is wrong.
func TestExplainConnectErrors(t *testing.T) {
	t.Parallel()
	const url = "nats://127.0.0.1:4222"
	pipe := fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:4222: %w", syscall.EPIPE)
	for _, tc := range []struct {
		name          string
		cert          string
		certRequested bool
		err           error
		want          string
	}{
		{"no certificate, broken pipe", "", true, pipe,
			"connect to " + url + ": the server requires a client certificate (mutual TLS) and none was given: " +
				"pass one with --tlscert and --tlskey (NATS_CERT, NATS_KEY) (connecting failed with: " + pipe.Error() + ")"},
		{"no certificate, EOF", "", true, errors.New("EOF"),
			"the server requires a client certificate (mutual TLS) and none was given"},
		{"certificate refused, broken pipe", "client.pem", true, pipe,
			"the server did not accept the client certificate of --tlscert (NATS_CERT)"},
		{"broken pipe, no certificate asked for", "", false, pipe, "connect to " + url + ": " + pipe.Error()},
		{"refused credentials come first", "", true, nats.ErrAuthorization, "the server refused the credentials"},
		{"no servers", "", false, nats.ErrNoServers, "(is a NATS server running there? For development, start one with: aster dev)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := connFlags{server: url, cert: tc.cert}
			err := f.explain(tc.err, tc.certRequested)
			assert.ErrorIs(t, err, tc.err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                          "nats://127.0.0.1:4222",
		"nats://ops:s3cret@h1:4222,nats://tok@h2:4222":   "nats://ops:xxxxx@h1:4222,nats://xxxxx@h2:4222",
		"tls://ops:s3cret@h1:4222, nats://h2:4222":       "tls://ops:xxxxx@h1:4222, nats://h2:4222",
		"nats://ops:s3cret@h1:4222 nats://other:p@h2:42": "xxxxx",
		"h1:4222": "h1:4222",
	} {
		assert.Equal(t, want, redact(in), in)
	}
}
