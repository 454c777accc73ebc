package monitor_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
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
