package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/supervision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	res, err := run(t.Context(), &out, true)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Empty(t, check(res), "the verdict")
	assert.True(t, strings.HasPrefix(verdict(check(res)), "verdict: PASS: "))
	assert.Contains(t, out.String(), "shop (supervisor, one-for-one) running")

	// The checks can fail: each change to what was observed is named.
	assert.Equal(t, "verdict: FAIL: a; b", verdict([]string{"a", "b"}))
	for name, spoil := range map[string]func(r *result){
		"payments' backoff delays": func(r *result) {
			r.Events = slices.DeleteFunc(slices.Clone(r.Events), func(ev supervision.Event) bool {
				e, ok := ev.(supervision.BackoffScheduled)
				return ok && e.Attempt == 3
			})
		},
		"restarts": func(r *result) {
			r.Events = append(slices.Clone(r.Events), supervision.ChildRestarted{Supervisor: "shop", Child: "config"})
		},
		"while healing: payments": func(r *result) { r.Healing = supervision.Snapshot{} },
		"healed: the temporary child warmup": func(r *result) {
			r.Healed.Children = append(slices.Clone(r.Healed.Children), supervision.Snapshot{Name: "warmup"})
		},
		"the doomed tree returned": func(r *result) { r.Doomed = errors.New("no") },
	} {
		spoilt := *res
		spoil(&spoilt)
		problems := check(&spoilt)
		require.NotEmpty(t, problems, name)
		assert.Contains(t, strings.Join(problems, "; "), name)
	}
}
