package supervision_test

import (
	"time"

	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// TestStrategies checks, for each strategy and each failing child, which
// children restart, and that the group is stopped in reverse order and
// started again in start order.
func TestStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy supervision.Strategy
		fail     string
		inc      []uint64 // incarnations of a, b, c afterwards
		journal  []string
	}{
		{supervision.OneForOne, "a", []uint64{2, 1, 1}, []string{"stop a", "start a"}},
		{supervision.OneForOne, "b", []uint64{1, 2, 1}, []string{"stop b", "start b"}},
		{supervision.OneForOne, "c", []uint64{1, 1, 2}, []string{"stop c", "start c"}},
		{supervision.OneForAll, "a", []uint64{2, 2, 2},
			[]string{"stop a", "stop c", "stop b", "start a", "start b", "start c"}},
		{supervision.OneForAll, "b", []uint64{2, 2, 2},
			[]string{"stop b", "stop c", "stop a", "start a", "start b", "start c"}},
		{supervision.OneForAll, "c", []uint64{2, 2, 2},
			[]string{"stop c", "stop b", "stop a", "start a", "start b", "start c"}},
		{supervision.RestForOne, "a", []uint64{2, 2, 2},
			[]string{"stop a", "stop c", "stop b", "start a", "start b", "start c"}},
		{supervision.RestForOne, "b", []uint64{1, 2, 2}, []string{"stop b", "stop c", "start b", "start c"}},
		{supervision.RestForOne, "c", []uint64{1, 1, 2}, []string{"stop c", "start c"}},
	} {
		t.Run(tc.strategy.String()+"/"+tc.fail, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := &journal{}
				r := start(t, supervision.Spec{Name: "app", Strategy: tc.strategy, Children: []supervision.ChildSpec{
					{Name: "a", Props: worker("a", j), Backoff: immediate},
					{Name: "b", Props: worker("b", j), Backoff: immediate},
					{Name: "c", Props: worker("c", j), Backoff: immediate},
				}}, supervision.Options{})
				j.take()
				r.send(tc.fail, boom{})
				assert.Equal(t, tc.inc, r.incarnations("a", "b", "c"))
				assert.Equal(t, tc.journal, j.take())
				for _, name := range []string{"a", "b", "c"} {
					assert.Equal(t, supervision.StateRunning, r.child(name).State, name)
				}
				require.NoError(t, r.stop())
			})
		})
	}
}

// TestStrategyRestartsWithBackoff checks that a group restart waits for the
// failing child's backoff, and that the failing child's PID id is kept.
func TestStrategyRestartsWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		bo := supervision.Backoff{Base: time.Second, Jitter: supervision.NoJitter}
		r := start(t, supervision.Spec{Name: "app", Strategy: supervision.OneForAll, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: bo},
			{Name: "b", Props: worker("b", j), Backoff: bo},
		}}, supervision.Options{})
		j.take()
		before := r.pid("b")
		r.send("b", boom{})
		assert.Equal(t, []string{"stop b", "stop a"}, j.take())
		assert.Equal(t, supervision.StateBackoff, r.child("a").State)
		assert.Equal(t, supervision.StateBackoff, r.child("b").State)
		assert.Equal(t, time.Now().Add(time.Second), r.child("b").NextRestart)
		advance(time.Second - time.Nanosecond)
		assert.Empty(t, j.take())
		advance(time.Nanosecond)
		assert.Equal(t, []string{"start a", "start b"}, j.take())
		assert.Equal(t, before.Id, r.pid("b").Id, "a restarted child keeps its PID id")
		require.NoError(t, r.stop())
	})
}

// TestGroupRestartsAndTransientChildren pins what OTP's supervisor does
// with a transient child that has exited normally: its exit restarts
// nothing, neither the child nor its siblings; but when a sibling's exit
// later restarts the group, the transient child is started again with it
// (OTP restarts every non-temporary child of the group, running or not).
func TestGroupRestartsAndTransientChildren(t *testing.T) {
	for _, tc := range []struct {
		strategy supervision.Strategy
		fail     string
		inc      []uint64 // incarnations of a, t, c after the failure
	}{
		{supervision.OneForAll, "a", []uint64{2, 2, 2}},
		{supervision.OneForAll, "c", []uint64{2, 2, 2}},
		{supervision.RestForOne, "a", []uint64{2, 2, 2}},
		{supervision.RestForOne, "c", []uint64{1, 1, 2}}, // t is before c: not in the group
	} {
		t.Run(tc.strategy.String()+"/"+tc.fail, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := &journal{}
				r := start(t, supervision.Spec{Name: "app", Strategy: tc.strategy, Children: []supervision.ChildSpec{
					{Name: "a", Props: worker("a", j), Backoff: immediate},
					{Name: "t", Props: worker("t", j), Restart: supervision.Transient, Backoff: immediate},
					{Name: "c", Props: worker("c", j), Backoff: immediate},
				}}, supervision.Options{})
				j.take()
				r.takeEvents()

				r.send("t", quit{})
				assert.Equal(t, []string{"stop t"}, j.take(), "a normal exit of a transient child restarts nothing")
				assert.Equal(t, []uint64{1, 1, 1}, r.incarnations("a", "t", "c"))
				assert.Equal(t, supervision.StateStopped, r.child("t").State)

				r.send(tc.fail, boom{})
				assert.Equal(t, tc.inc, r.incarnations("a", "t", "c"))
				want := supervision.StateStopped
				if tc.inc[1] == 2 {
					want = supervision.StateRunning
				}
				assert.Equal(t, want, r.child("t").State)
				require.NoError(t, r.stop())
			})
		})
	}
}
