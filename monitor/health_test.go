package monitor_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/supervision"
)

// fixed is a Supervisor whose Status is st.
type fixed actors.Status

func (f fixed) Status() actors.Status { return actors.Status(f) }

func (f fixed) Tree() *supervision.Tree { return nil }

// frozen is a Tree whose snapshot is s.
type frozen supervision.Snapshot

func (f frozen) Snapshot() supervision.Snapshot { return supervision.Snapshot(f) }

func TestHealth(t *testing.T) {
	now := time.Now()
	leading := func(validFor time.Duration) actors.Status {
		return actors.Status{LeaseID: "billing.outbox", OwnerID: "pod-a", State: actors.StateLeading, Token: 42,
			ValidUntil: now.Add(validFor), RenewedAt: now.Add(validFor - 9*time.Second)}
	}
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		status *actors.Status
		tree   *supervision.Snapshot
		live   bool
		ready  bool
		reason string
	}{
		{name: "nothing registered", live: true, ready: true},
		{name: "leading on time", status: ptr(leading(5 * time.Second)), live: true, ready: true},
		{name: "leading, renewal overdue", status: ptr(leading(-1500 * time.Millisecond)),
			reason: "lease billing.outbox: leads with token 42, but its renewal is overdue: its validity ended 1.5s ago (last renewed 10.5s ago)"},
		{name: "overdue within the grace", grace: 2 * time.Second, status: ptr(leading(-1500 * time.Millisecond)), live: true, ready: true},
		{name: "standby with an error", live: true, ready: true, status: &actors.Status{LeaseID: "billing.outbox",
			State: actors.StateStandby, LastError: "lease: store unavailable"}},
		{name: "stuck workload", status: &actors.Status{LeaseID: "billing.outbox", State: actors.StateStandby,
			Stuck: 1, LastError: "actors: workload did not stop (token 7)"},
			reason: "lease billing.outbox: workloads of earlier terms did not stop (1); no term starts until they do (last error: actors: workload did not stop (token 7))"},
		{name: "escalated", live: true, status: &actors.Status{LeaseID: "billing.outbox", State: actors.StateEscalated,
			Restarts: 6, LastError: "boom"}, reason: "lease billing.outbox: escalated: gave up after 6 restarts (last error: boom)"},
		{name: "not started", live: true, status: &actors.Status{LeaseID: "billing.outbox"}, reason: "lease billing.outbox: not started"},
		{name: "stopped", live: true, status: &actors.Status{LeaseID: "billing.outbox", State: actors.StateStopped},
			reason: "lease billing.outbox: stopped"},
		{name: "tree running", live: true, ready: true, tree: &supervision.Snapshot{Name: "jobs", State: supervision.StateRunning}},
		{name: "tree failed", tree: &supervision.Snapshot{Name: "jobs", State: supervision.StateFailed,
			LastFailure: errors.New("intensity exceeded")}, reason: "tree jobs: failed: intensity exceeded"},
		{name: "tree not running", live: true, tree: &supervision.Snapshot{Name: "jobs"}, reason: "tree jobs: stopped, not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := monitor.New(monitor.Config{Instance: "pod-a", RenewalGrace: tc.grace})
			if tc.status != nil {
				reg.AddSupervisor(fixed(*tc.status))
			}
			if tc.tree != nil {
				reg.AddTree(frozen(*tc.tree))
			}
			rep := reg.Report()
			assert.Equal(t, tc.live, rep.Live, "live")
			assert.Equal(t, tc.ready, rep.Ready, "ready")
			if tc.reason == "" {
				assert.Empty(t, rep.Problems)
				return
			}
			require.Len(t, rep.Problems, 1)
			// Durations in reasons are measured from the report's time.
			reason := rep.Problems[0].String()
			if tc.status != nil && tc.status.State == actors.StateLeading {
				shift := rep.Time.Sub(now)
				want := strings.NewReplacer("1.5s", (1500*time.Millisecond + shift).Round(time.Millisecond).String(),
					"10.5s", (10500*time.Millisecond + shift).Round(time.Millisecond).String()).Replace(tc.reason)
				assert.Equal(t, want, reason)
				return
			}
			assert.Equal(t, tc.reason, reason)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestHandler(t *testing.T) {
	reg := monitor.New(monitor.Config{Instance: "pod-a"})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, err := io.ReadAll(rec.Result().Body)
		require.NoError(t, err)
		return rec.Code, string(b)
	}
	for _, path := range []string{"/livez", "/healthz", "/readyz"} {
		code, body := get(path)
		assert.Equal(t, http.StatusOK, code, path)
		assert.Equal(t, "ok\n", body, path)
	}

	stuck := actors.Status{LeaseID: "billing.outbox", State: actors.StateStandby, Stuck: 2}
	reg.AddSupervisor(fixed(stuck))
	reg.AddTree(frozen(supervision.Snapshot{Name: "jobs"}))
	code, body := get("/livez")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "pod-a: not live\n[live] lease billing.outbox: workloads of earlier terms did not stop (2); "+
		"no term starts until they do (last error: none)\n", body)
	code, body = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "pod-a: not ready\n[live] lease billing.outbox: workloads")
	assert.Contains(t, body, "\n[ready] tree jobs: stopped, not running\n", "a process that is not live is not ready either")

	code, body = get("/status")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"instance": "pod-a"`)
	assert.Contains(t, body, `"state": "standby"`)
	assert.Contains(t, body, `"stuck": 2`)
	code, _ = get("/nothing")
	assert.Equal(t, http.StatusNotFound, code)

	// A store that stopped for good fails the liveness probe.
	stopped := monitor.New(monitor.Config{Instance: "pod-b"})
	s := &fakeStore{}
	gone := errors.New(`natsstore: bucket "leases": bucket deleted: the bucket's stream is gone`)
	s.err.Store(&gone)
	stopped.AddStore("leases", s)
	rec := httptest.NewRecorder()
	stopped.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	b, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	assert.Equal(t, "pod-b: not live\n[live] store leases: stopped for good, a restart is needed: "+gone.Error()+"\n", string(b))
}
