package backoff

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCeilingGrowsExponentiallyAndCaps(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second}
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for i, w := range want {
		assert.Equal(t, w*time.Millisecond, p.Ceiling(i), "attempt %d", i)
	}
	assert.Equal(t, 2*time.Second, p.Ceiling(1_000_000), "huge attempts saturate at the cap")
	assert.Equal(t, DefaultBase, Policy{}.Ceiling(0))
	assert.Equal(t, DefaultCap, Policy{}.Ceiling(64))
	assert.Equal(t, 300*time.Millisecond, Policy{Base: 100 * time.Millisecond, Multiplier: 3}.Ceiling(1))
}

func TestJitterStaysWithinBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		jitter Jitter
		lo     func(c time.Duration) time.Duration
	}{
		{Full, func(time.Duration) time.Duration { return 0 }},
		{Equal, func(c time.Duration) time.Duration { return c / 2 }},
		{None, func(c time.Duration) time.Duration { return c }},
	} {
		p := Policy{Base: 10 * time.Millisecond, Cap: time.Second, Jitter: tc.jitter}
		seen := map[time.Duration]bool{}
		for attempt := range 12 {
			c := p.Ceiling(attempt)
			for range 50 {
				d := p.Delay(attempt, r)
				require.GreaterOrEqual(t, d, tc.lo(c), "jitter %d attempt %d", tc.jitter, attempt)
				require.LessOrEqual(t, d, c, "jitter %d attempt %d", tc.jitter, attempt)
				seen[d] = true
			}
		}
		if tc.jitter != None {
			assert.Greater(t, len(seen), 100, "jitter %d must spread delays", tc.jitter)
		}
	}
}

func TestBackoffResetsAfterStablePeriod(t *testing.T) {
	b := Backoff{Policy: Policy{Base: time.Second, Cap: 8 * time.Second, Jitter: None, ResetAfter: time.Minute}}
	now := time.Unix(0, 0)
	var got []time.Duration
	for range 5 {
		b.Started(now)
		now = now.Add(time.Second)
		got = append(got, b.Failed(now))
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 8, 8}, scale(got, time.Second))
	b.Started(now)
	now = now.Add(time.Minute)
	assert.Equal(t, time.Second, b.Failed(now), "a failure after a stable minute starts over")
	assert.Equal(t, 1, b.Attempt())
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"zero", Policy{}, true},
		{"explicit", Policy{Base: time.Second, Cap: time.Minute, Multiplier: 1.5}, true},
		{"cap below base", Policy{Base: time.Minute, Cap: time.Second}, false},
		{"default cap below base", Policy{Base: time.Hour}, false},
		{"negative base", Policy{Base: -1}, false},
		{"negative cap", Policy{Cap: -1}, false},
		{"negative reset", Policy{ResetAfter: -1}, false},
		{"shrinking", Policy{Multiplier: 0.5}, false},
		{"unknown jitter", Policy{Jitter: 9}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}
