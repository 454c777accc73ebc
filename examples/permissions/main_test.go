package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPermissions proves the permissions docs/nats.md lists, in each
// topology: with them a service account uses a lease fully, and its watch
// keeps up with several MiB of updates; without any one that is refused
// at once, it is refused with natsstore.ErrPermission.
func TestPermissions(t *testing.T) {
	for name, top := range map[string]natstest.Topology{
		"plain":            {},
		"domain":           {Domain: "hub"},
		"domain-leaf":      {Domain: "hub", Leaf: true},
		"api-prefix":       {APIPrefix: "JS.A.API", InboxPrefix: "_INBOX_SVC"},
		"own-inbox-prefix": {InboxPrefix: "_INBOX_SVC"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			require.NoError(t, Check(t.Context(), "aster_leases", top, &out))
			t.Log("\n" + out.String())
			assert.Equal(t, 8, strings.Count(out.String(), "ok: "),
				"service, minimal, five refused publish permissions and the inbox")
		})
	}
}

// Without the flow-control subject, a watch stalls after about 2 MiB of
// updates: the check must notice.
func TestPermissionsNeedFlowControl(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := check(t.Context(), "aster_leases", natstest.Topology{}, &out, "$JS.FC.KV_aster_leases.>")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "user minimal: the watch stalled")
}

func TestConfigOutput(t *testing.T) {
	t.Parallel()
	print := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(args, &stdout, &stderr), stderr.String())
		return stdout.String()
	}

	got := print("-bucket", "leases")
	assert.Contains(t, got, `"$JS.API.STREAM.INFO.KV_leases"`)
	assert.Contains(t, got, `"$KV.leases.>"`)
	assert.Contains(t, got, `"_INBOX.>"`)
	assert.Contains(t, got, `"$JS.FC.KV_leases.>", # required`)
	assert.NotContains(t, got, "recommended")
	assert.NotContains(t, got, "STREAM.CREATE", "creation only with -create")

	// Connected to a server of the domain, the server maps the domain's
	// API before it checks permissions: the plain subjects.
	got = print("-bucket", "leases", "-domain", "hub")
	assert.Contains(t, got, `"$JS.API.STREAM.INFO.KV_leases"`)
	assert.Contains(t, got, `"$KV.leases.>"`)
	assert.NotContains(t, got, "$JS.hub.")

	// Through a leaf node: the domain's API, and the keys under it.
	got = print("-bucket", "leases", "-domain", "hub", "-leaf")
	assert.Contains(t, got, `"$JS.hub.API.STREAM.INFO.KV_leases"`)
	assert.Contains(t, got, `"$JS.hub.API.$KV.leases.>"`)
	assert.NotContains(t, got, `"$KV.leases.>"`)
	assert.Contains(t, got, `"$JS.FC.KV_leases.>"`)

	got = print("-bucket", "leases", "-api-prefix", "JS.A.API", "-inbox-prefix", "_INBOX_SVC", "-exporter", "A")
	assert.Contains(t, got, `"JS.A.API.STREAM.MSG.GET.KV_leases"`)
	assert.Contains(t, got, `"JS.A.API.$KV.leases.>"`)
	assert.Contains(t, got, `"_INBOX_SVC.>"`)
	perms, accts, ok := strings.Cut(got, "\n# In account A")
	require.True(t, ok, got)
	exports, imports, ok := strings.Cut(accts, "# In the service's account:")
	require.True(t, ok, got)
	_, exports, _ = strings.Cut(exports, "\n")
	_, err := conf.Parse(fmt.Sprintf("accounts: { A: { jetstream: enabled, %s }, SVC: { users: [ { user: svc, password: pw, %s } ], %s } }",
		exports, perms, imports))
	require.NoError(t, err, "the output is valid nats-server configuration")

	got = print("-create")
	assert.Contains(t, got, `"$JS.API.STREAM.CREATE.KV_aster_leases"`)
	// The output is a valid nats-server authorization block.
	_, err = conf.Parse("authorization: { users: [ { user: svc, password: pw, " + got + " } ] }")
	require.NoError(t, err)

	for _, args := range [][]string{
		{"-leaf"}, // a leaf reaches a domain
		{"-domain", "hub", "-api-prefix", "JS.A.API"}, // one or the other
		{"-api-prefix", "JS.A.API"},                   // deliveries need an inbox of the service's own
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), "%v", args)
		assert.NotEmpty(t, stderr.String())
	}
}

// TestMonitorPermissions proves the monitor micro service's permissions:
// with them a service registers it and an operator reads its status;
// without them the service is refused.
func TestMonitorPermissions(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, CheckMonitor(t.Context(), "aster_leases", natstest.Topology{}, &out))
	t.Log("\n" + out.String())
	assert.Equal(t, 2, strings.Count(out.String(), "ok: "))

	var printed, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-monitor"}, &printed, &stderr), stderr.String())
	for _, s := range []string{`"$SRV.>"`, `"aster.>"`, `"$SRV.INFO.aster"`} {
		assert.Contains(t, printed.String(), s)
	}
}
