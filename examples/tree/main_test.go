package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/supervision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// find returns the child at path (names below the root) in s.
func find(t *testing.T, s supervision.Snapshot, path ...string) *supervision.Snapshot {
	t.Helper()
	cur := &s
	for _, name := range path {
		var next *supervision.Snapshot
		for i := range cur.Children {
			if cur.Children[i].Name == name {
				next = &cur.Children[i]
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	res, err := run(t.Context(), &out, true)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)

	// payments: three failures, backoff doubling from 100 ms (no jitter).
	var delays []time.Duration
	restarts := map[string]int{}
	for _, ev := range res.Events {
		switch e := ev.(type) {
		case supervision.BackoffScheduled:
			if e.Child == "payments" {
				delays = append(delays, e.Delay)
			}
		case supervision.ChildRestarted:
			restarts[e.Supervisor+"/"+e.Child]++
		}
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, delays)
	assert.Equal(t, map[string]int{
		"shop/orders/payments": 3, "shop/orders/shipper": 3, // rest-for-one: shipper follows payments
		"shop/caches/users": 1, "shop/caches/products": 1, // one-for-all
	}, restarts, "source, config, warmup and migrate never restart")

	// While healing: payments and shipper wait for the same restart.
	p, s := find(t, res.Healing, "orders", "payments"), find(t, res.Healing, "orders", "shipper")
	require.NotNil(t, p)
	require.NotNil(t, s)
	assert.Equal(t, supervision.StateBackoff, p.State)
	assert.Equal(t, supervision.StateBackoff, s.State)
	assert.Equal(t, p.NextRestart, s.NextRestart)
	assert.Equal(t, supervision.StateRunning, find(t, res.Healing, "orders", "source").State)

	// Healed: every permanent child runs; the temporary one is gone; the
	// transient one finished normally and stays stopped.
	for _, path := range [][]string{{"config"}, {"orders", "source"}, {"orders", "payments"}, {"orders", "shipper"},
		{"caches", "users"}, {"caches", "products"}} {
		c := find(t, res.Healed, path...)
		require.NotNil(t, c, "%v", path)
		assert.Equal(t, supervision.StateRunning, c.State, "%v", path)
	}
	assert.Equal(t, 3, find(t, res.Healed, "orders", "payments").Restarts)
	assert.Equal(t, 4, int(find(t, res.Healed, "orders", "payments").Incarnation))
	assert.Nil(t, find(t, res.Healed, "warmup"), "temporary children are removed when they exit")
	m := find(t, res.Healed, "migrate")
	require.NotNil(t, m)
	assert.Equal(t, supervision.StateStopped, m.State)
	assert.Zero(t, m.Restarts)

	// The doomed tree escalates.
	var ie *supervision.IntensityError
	require.True(t, errors.As(res.Doomed, &ie), "%v", res.Doomed)
	assert.Equal(t, "broken", ie.Child)
	assert.Equal(t, 2, ie.Intensity)
	assert.Contains(t, out.String(), "shop (supervisor, one-for-one) running")
}
