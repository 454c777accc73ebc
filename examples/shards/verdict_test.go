//go:build unix

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestVerdictFailsOnAShardFreeAfterTheJoin: a shard that runs nowhere for
// longer than maxFreeAfterJoin after an instance joins fails the verdict,
// as tenant/1 did for 8 s when a crashed member's key was still in the
// store; handovers of a few milliseconds do not.
func TestVerdictFailsOnAShardFreeAfterTheJoin(t *testing.T) {
	join := time.Now()
	at := func(d time.Duration) time.Time { return join.Add(d) }
	shards := []string{"tenant/0", "tenant/1", "tenant/2"}
	for _, tc := range []struct {
		name  string
		runs  map[string][]*span
		worst string
		free  time.Duration
	}{
		{name: "handed over at once", runs: map[string][]*span{
			"tenant/0": {{name: "i1", start: at(-time.Minute)}},
			"tenant/1": {{name: "i1", start: at(-time.Minute), end: at(20 * time.Millisecond)},
				{name: "i4", start: at(25 * time.Millisecond)}},
			"tenant/2": {{name: "i2", start: at(-time.Minute), end: at(30 * time.Millisecond)},
				{name: "i4", start: at(40 * time.Millisecond)}},
		}, worst: "tenant/2", free: 10 * time.Millisecond},
		{name: "left free until the crashed member's key aged out", runs: map[string][]*span{
			"tenant/0": {{name: "i1", start: at(-time.Minute)}},
			"tenant/1": {{name: "i1", start: at(-time.Minute), end: at(20 * time.Millisecond)},
				{name: "i4", start: at(6300 * time.Millisecond)}},
			"tenant/2": {{name: "i2", start: at(-time.Minute), end: at(30 * time.Millisecond)},
				{name: "i4", start: at(40 * time.Millisecond)}},
		}, worst: "tenant/1", free: 6280 * time.Millisecond},
		{name: "never taken", runs: map[string][]*span{
			"tenant/0": {{name: "i1", start: at(-time.Minute)}},
			"tenant/1": {{name: "i1", start: at(-time.Minute)}},
			"tenant/2": {{name: "i2", start: at(-time.Minute), end: at(-time.Second)}},
		}, worst: "tenant/2", free: 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			r.runs = tc.runs
			worst, free := r.longestFree(shards, join, at(8*time.Second))
			assert.Equal(t, tc.worst, worst)
			assert.Equal(t, tc.free, free)

			s := &summary{shards: shards}
			for range 4 {
				s.steps = append(s.steps, step{what: "a step", balanced: true, least: -1})
			}
			s.steps[2] = step{what: "add an instance", balanced: true, least: -1, maxFree: maxFreeAfterJoin,
				free: free, freeShard: worst}
			summarize(r, s)
			assert.Equal(t, free <= maxFreeAfterJoin, s.OK(), "%v", s.problems)
		})
	}
}
