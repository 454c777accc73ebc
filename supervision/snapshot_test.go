package supervision_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

func snapshotSpec(j *journal) supervision.Spec {
	return supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
		{Name: "db", Props: worker("db", j)},
		{Name: "workers", Tree: &supervision.Spec{Strategy: supervision.RestForOne, Children: []supervision.ChildSpec{
			{Name: "w1", Props: worker("w1", j), Restart: supervision.Transient,
				Backoff: supervision.Backoff{Base: 200 * time.Millisecond, Jitter: supervision.NoJitter}},
			{Name: "w2", Func: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		}}},
	}}
}

// TestSnapshotText checks the text tree, in virtual time.
func TestSnapshotText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tree, err := supervision.New(snapshotSpec(nil), supervision.Options{})
		require.NoError(t, err)
		assert.Equal(t, `app (supervisor, one-for-one) stopped
├── db (actor, permanent) stopped
└── workers (supervisor, rest-for-one, permanent) stopped
    ├── w1 (actor, transient) stopped
    └── w2 (func, permanent) stopped
`, tree.Snapshot().String(), "a tree that never ran shows its spec")

		r := start(t, snapshotSpec(nil), supervision.Options{})
		advance(time.Second)
		r.send("workers/w1", boom{})
		advance(50 * time.Millisecond)
		assert.Equal(t, `app (supervisor, one-for-one) running pid=app
├── db (actor, permanent) running pid=app/db incarnation=1
└── workers (supervisor, rest-for-one, permanent) running pid=app/workers incarnation=1
    ├── w1 (actor, transient) backoff incarnation=1 next restart in 150ms failed 50ms ago: panic: boom w1
    └── w2 (func, permanent) backoff incarnation=1 next restart in 150ms
`, r.tree.Snapshot().String())
		require.NoError(t, r.stop())
	})
}

// TestSnapshotValueAndJSON checks the Go value and its JSON encoding.
func TestSnapshotValueAndJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, snapshotSpec(nil), supervision.Options{})
		failedAt := time.Now()
		r.send("workers/w1", boom{})
		s := r.tree.Snapshot()
		w1 := s.Children[1].Children[0]
		assert.Equal(t, "app/workers/w1", w1.Path)
		assert.Equal(t, supervision.KindActor, w1.Kind)
		assert.Equal(t, supervision.Transient, w1.Restart)
		assert.Equal(t, supervision.StateBackoff, w1.State)
		assert.Nil(t, w1.PID)
		assert.Equal(t, failedAt, w1.LastFailureAt)
		assert.Equal(t, failedAt.Add(200*time.Millisecond), w1.NextRestart)
		assert.EqualError(t, w1.LastFailure, "panic: boom w1")

		b, err := json.Marshal(s)
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		assert.Equal(t, "one-for-one", got["strategy"])
		assert.Equal(t, "running", got["state"])
		assert.Equal(t, "2000-01-01T00:00:00Z", got["time"])
		workers := got["children"].([]any)[1].(map[string]any)
		assert.Equal(t, "rest-for-one", workers["strategy"])
		assert.Equal(t, "app/workers", workers["pid"])
		gw1 := workers["children"].([]any)[0].(map[string]any)
		assert.Equal(t, map[string]any{
			"name": "w1", "path": "app/workers/w1", "kind": "actor", "restart": "transient", "state": "backoff",
			"incarnation": 1.0, "restarts": 0.0, "last_failure": "panic: boom w1",
			"last_failure_at": "2000-01-01T00:00:00Z", "next_restart": "2000-01-01T00:00:00.2Z",
		}, gw1)

		advance(200 * time.Millisecond)
		w1 = r.tree.Snapshot().Children[1].Children[0]
		assert.Equal(t, supervision.StateRunning, w1.State)
		assert.Equal(t, uint64(2), w1.Incarnation)
		assert.Equal(t, 1, w1.Restarts)
		assert.Equal(t, "app/workers/w1", w1.PID.Id)
		assert.True(t, w1.NextRestart.IsZero())
		require.NoError(t, r.stop())
	})
}
