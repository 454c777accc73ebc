package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

// The wait after a held key is deleted by hand, end to end on a real
// server: a standby's Status, `aster status` and `aster watch` say that the
// key vanished and until when nobody may take it (the bucket's MaxTTL, 2
// minutes by default), where they said "standby" and "free" before (issue
// 32).
func TestStatusAndWatchShowAVanishedKeysWait(t *testing.T) {
	srv := natstest.Start(t)
	env := map[string]string{"NATS_URL": srv.ClientURL()}
	const id = "billing.outbox"
	holder := store(t, srv.ClientURL(), natsstore.DefaultBucket)
	held := take(t, holder, id, "pod-a", nil)

	// pod-b stands by, and reports through the monitor's service.
	standby := store(t, srv.ClientURL(), natsstore.DefaultBucket)
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lease.Config{LeaseID: id, OwnerID: "pod-b", TTL: 10 * time.Second},
		Store: standby,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			<-ctx.Done()
			return nil
		}),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	reg := monitor.New(monitor.Config{Instance: "pod-b"})
	reg.AddSupervisor(sup)
	instanceOf(t, srv.ClientURL(), reg)
	require.Eventually(t, func() bool { return sup.Status().Wait == actors.WaitHeld }, 5*time.Second, 10*time.Millisecond)
	st := sup.Status()
	assert.WithinDuration(t, time.Now().Add(held.TTL), st.WaitUntil, 2*time.Second, "the holder's TTL")

	watchOut := newLines()
	wctx, wcancel := context.WithCancel(t.Context())
	watched := make(chan int, 1)
	go func() {
		watched <- run(wctx, []string{"watch", id, "--count", "2", "--server", srv.ClientURL()},
			func(string) string { return "" }, watchOut, watchOut)
	}()
	t.Cleanup(wcancel)
	assert.Contains(t, watchOut.next(t), "held by pod-a")

	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctxT(t), natsstore.DefaultBucket)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctxT(t), id)) // nats kv del aster_leases billing.outbox
	deleted := time.Now()

	require.Eventually(t, func() bool { return sup.Status().Wait == actors.WaitVanished }, 5*time.Second, 10*time.Millisecond)
	st = sup.Status()
	assert.Equal(t, actors.StateStandby, st.State)
	assert.Empty(t, st.Holder.OwnerID)
	assert.WithinDuration(t, deleted.Add(natsstore.DefaultMaxTTL), st.WaitUntil, 2*time.Second,
		"nobody may take it for the bucket's MaxTTL")

	line := watchOut.next(t)
	assert.Regexp(t, `  billing.outbox  free \(was pod-a, token \d+\); but it was deleted without a release: nobody may `+
		`take it for (2m0s|1m5\d(\.\d)?s), until about \d\d:\d\d:\d\d \(the bucket's MaxTTL, 2m0s\)$`, line)
	require.Equal(t, 0, <-watched)

	r := aster(t, env, "status")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("aster status during a vanished-key wait:\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	assert.Regexp(t, `^pod-b\s+\S+\s+ok\s+billing.outbox\s+standby \(key vanished without a release: nobody may take it `+
		`for (2m0s|1m5\d(\.\d)?s), until `+regexp.QuoteMeta(st.WaitUntil.Format("15:04:05"))+`\)\s+\S+ ago\s+-\s+-\s+-\s+-$`, lines[1])

	r = aster(t, env, "status", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var reps []reportJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &reps))
	require.Len(t, reps, 1)
	require.Len(t, reps[0].Leases, 1)
	assert.Equal(t, "vanished", reps[0].Leases[0].Wait)
	assert.True(t, st.WaitUntil.Equal(reps[0].Leases[0].WaitUntil))
}

// Every reason a standby waits reads as why and until when; the last
// error carries its age, and is marked old once a later step succeeded.
func TestWaitNoteAndLastError(t *testing.T) {
	now := time.Date(2026, 12, 5, 13, 0, 0, 0, time.Local)
	in := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		wait         string
		until, retry time.Time
		want         string
	}{
		{"", time.Time{}, time.Time{}, ""},
		{"none", time.Time{}, time.Time{}, ""},
		{"held", in(8 * time.Second), in(5 * time.Second), "holder's TTL: free in 8s unless renewed"},
		{"held", time.Time{}, in(5 * time.Second), "held by another"},
		{"vanished", in(2 * time.Minute), in(5 * time.Second),
			"key vanished without a release: nobody may take it for 2m0s, until 13:02:00"},
		{"vanished", time.Time{}, in(5 * time.Second),
			"key vanished without a release: nobody may take it until its last holder's TTL has run out"},
		{"corrupt", time.Time{}, in(20 * time.Second),
			"key holds a value that is not a lease: waits for an operator to delete it (see LAST ERROR); looks again in 20s"},
		{"hold-off", in(4 * time.Second), in(4 * time.Second), "holding off after stepping down: 4s left, until 13:00:04"},
		{"backoff", in(3 * time.Second), in(3 * time.Second), "backing off after errors (see LAST ERROR): next try in 3s"},
		{"restart", in(time.Minute), in(time.Minute), "restart backoff after a failed term: 1m0s left"},
		{"stuck", time.Time{}, in(time.Second), "waits for the workloads of earlier terms to stop"},
		{"held", in(-time.Second), in(time.Second), "holder's TTL: free in 0s unless renewed"},
	} {
		assert.Equal(t, tc.want, waitNote(tc.wait, tc.until, tc.retry, now), "%s until %v", tc.wait, tc.until)
	}

	assert.Equal(t, "-", lastError("", time.Time{}, time.Time{}, now))
	assert.Equal(t, "12s ago: natsstore: key \"x\" is not an aster lease …",
		lastError("natsstore: key \"x\" is not an aster lease\nmore", in(-12*time.Second), time.Time{}, now))
	assert.Equal(t, "old, 3m0s ago, cleared 1m0s ago: natsstore: key \"x\" is not an aster lease",
		lastError("natsstore: key \"x\" is not an aster lease", in(-3*time.Minute), in(-time.Minute), now))
}
