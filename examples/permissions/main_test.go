package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPermissions proves the permissions docs/nats.md lists: with them a
// service account uses a lease fully; without any required one it is
// refused with natsstore.ErrPermission.
func TestPermissions(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Check(t.Context(), "aster_leases", &out))
	t.Log("\n" + out.String())
	assert.Equal(t, 7, strings.Count(out.String(), "ok: "), "service, minimal, and five required permissions")
}

func TestConfigOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-bucket", "leases", "-domain", "hub"}, &stdout, &stderr))
	got := stdout.String()
	assert.Contains(t, got, `"$JS.hub.API.STREAM.INFO.KV_leases"`)
	assert.Contains(t, got, `"$KV.leases.>"`)
	assert.Contains(t, got, `"_INBOX.>"`)
	assert.NotContains(t, got, "STREAM.CREATE", "creation only with -create")

	stdout.Reset()
	require.Equal(t, 0, run([]string{"-create"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), `"$JS.API.STREAM.CREATE.KV_aster_leases"`)

	// The output is a valid nats-server authorization block.
	_, err := conf.Parse("authorization: { users: [ { user: svc, password: pw, " + stdout.String() + " } ] }")
	require.NoError(t, err)
}
