package monitor_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
)

// A lease's report carries why its standby waits and until when, and how
// old its last error is and whether it still stands: what `aster status`
// prints (issue 32).
func TestReportSaysWhyAStandbyWaits(t *testing.T) {
	now := time.Now()
	reg := monitor.New(monitor.Config{Instance: "pod-b"})
	reg.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-b", State: actors.StateStandby,
		Since: now.Add(-time.Second), Wait: actors.WaitVanished, WaitUntil: now.Add(2 * time.Minute),
		RetryAt: now.Add(5 * time.Second), LastError: "lease lost", LastErrorAt: now.Add(-time.Minute),
		LastErrorCleared: now.Add(-time.Second)}))
	b, err := json.Marshal(reg.Report())
	require.NoError(t, err)
	var rep struct {
		Leases []struct {
			Wait             string    `json:"wait"`
			WaitUntil        time.Time `json:"wait_until"`
			LastErrorAt      time.Time `json:"last_error_at"`
			LastErrorCleared time.Time `json:"last_error_cleared"`
		} `json:"leases"`
		Ready bool `json:"ready"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Leases, 1)
	assert.Equal(t, "vanished", rep.Leases[0].Wait)
	assert.True(t, now.Add(2*time.Minute).Equal(rep.Leases[0].WaitUntil))
	assert.True(t, now.Add(-time.Minute).Equal(rep.Leases[0].LastErrorAt))
	assert.True(t, now.Add(-time.Second).Equal(rep.Leases[0].LastErrorCleared))
	assert.True(t, rep.Ready, "a standby that waits is ready")

	reg = monitor.New(monitor.Config{Instance: "pod-a"})
	reg.AddSupervisor(fixed(actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-a", State: actors.StateLeading}))
	b, err = json.Marshal(reg.Report())
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"wait"`, "no wait while leading")
	assert.NotContains(t, string(b), `"wait_until"`)
}

// aster watch's lines about a value that is not a lease say what deleting
// it costs, and the line after its deletion does not name a holder "-".
func TestDescribeACorruptValue(t *testing.T) {
	at := time.Date(2026, 12, 5, 13, 22, 46, 175e6, time.UTC)
	corrupt := lease.Observation{LeaseID: "example.service", Held: true, Revision: 7, Seen: at}
	assert.Equal(t, "13:22:46.175  example.service  held by a value that is not a lease (revision 7): nobody can take "+
		"it until it is deleted, and then for the bucket's MaxTTL", monitor.Describe(corrupt, lease.Observation{}, true))
	free := lease.Observation{LeaseID: "example.service", Revision: 8, Seen: at}
	assert.Equal(t, "13:22:46.175  example.service  free (was a value that is not a lease)",
		monitor.Describe(free, corrupt, false))
	held := lease.Observation{LeaseID: "example.service", Held: true, Holder: lease.Holder{OwnerID: "pod-a", Token: 5}}
	assert.Equal(t, "13:22:46.175  example.service  free (was pod-a, token 5)", monitor.Describe(free, held, false))
}
