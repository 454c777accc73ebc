package lease_test

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
)

// maxTime is the largest time.Time, where expiries saturate.
var maxTime = time.Unix(1<<63-62135596801, 999999999)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func valid() lease.Config {
	return lease.Config{LeaseID: "billing.outbox", OwnerID: lease.NewOwnerID()}
}

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		ttl, renew, standby        time.Duration
		wantTTL, wantRenew, wantSB time.Duration
	}{
		{"zero means defaults", 0, 0, 0, 30 * time.Second, 10 * time.Second, 5 * time.Second},
		{"explicit values kept", time.Minute, 7 * time.Second, 2 * time.Second, time.Minute, 7 * time.Second, 2 * time.Second},
		{"zero renew is a third of the TTL", 9 * time.Second, 0, 0, 9 * time.Second, 3 * time.Second, 5 * time.Second},
		{"zero renew floors at 1s", 2 * time.Second, 0, 0, 2 * time.Second, time.Second, 5 * time.Second},
		{"renew >= TTL is half the TTL", 10 * time.Second, 10 * time.Second, 0, 10 * time.Second, 5 * time.Second, 5 * time.Second},
		{"renew > TTL is half the TTL", 10 * time.Second, time.Minute, 0, 10 * time.Second, 5 * time.Second, 5 * time.Second},
		{"renew >= TTL floors at 1s", 1500 * time.Millisecond, 2 * time.Second, 0, 1500 * time.Millisecond, time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lease.Config{TTL: tc.ttl, RenewInterval: tc.renew, StandbyRetryInterval: tc.standby}
			assert.Equal(t, tc.wantTTL, c.EffectiveTTL())
			assert.Equal(t, tc.wantRenew, c.EffectiveRenewInterval())
			assert.Equal(t, tc.wantSB, c.EffectiveStandbyRetryInterval())
		})
	}
	c := lease.Config{}
	assert.Equal(t, 3*time.Second, c.EffectiveSafetyMargin(), "margin defaults to TTL/10")
	assert.Equal(t, 3*time.Second, c.EffectiveStopTimeout(), "stop timeout defaults to TTL/10")
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*lease.Config)
		field string // "" means valid
	}{
		{"defaults", func(*lease.Config) {}, ""},
		{"one-second TTL", func(c *lease.Config) { c.TTL = time.Second }, ""},
		{"empty lease ID", func(c *lease.Config) { c.LeaseID = "" }, "LeaseID"},
		{"space in lease ID", func(c *lease.Config) { c.LeaseID = "billing outbox" }, "LeaseID"},
		{"wildcard lease ID", func(c *lease.Config) { c.LeaseID = "billing.*" }, "LeaseID"},
		{"full wildcard lease ID", func(c *lease.Config) { c.LeaseID = ">" }, "LeaseID"},
		{"leading dot", func(c *lease.Config) { c.LeaseID = ".billing" }, "LeaseID"},
		{"trailing dot", func(c *lease.Config) { c.LeaseID = "billing." }, "LeaseID"},
		{"empty token", func(c *lease.Config) { c.LeaseID = "billing..outbox" }, "LeaseID"},
		{"long lease ID", func(c *lease.Config) { c.LeaseID = strings.Repeat("a", 256) }, "LeaseID"},
		{"unicode lease ID", func(c *lease.Config) { c.LeaseID = "billing.ausgänge" }, "LeaseID"},
		{"all allowed characters", func(c *lease.Config) { c.LeaseID = "a-b/c_d=e.F9" }, ""},
		{"empty owner ID", func(c *lease.Config) { c.OwnerID = "" }, "OwnerID"},
		{"space in owner ID", func(c *lease.Config) { c.OwnerID = "node a" }, "OwnerID"},
		{"negative TTL", func(c *lease.Config) { c.TTL = -time.Second }, "TTL"},
		{"negative renew interval", func(c *lease.Config) { c.RenewInterval = -1 }, "RenewInterval"},
		{"negative standby retry", func(c *lease.Config) { c.StandbyRetryInterval = -1 }, "StandbyRetryInterval"},
		{"negative safety margin", func(c *lease.Config) { c.SafetyMargin = -1 }, "SafetyMargin"},
		{"negative stop timeout", func(c *lease.Config) { c.StopTimeout = -1 }, "StopTimeout"},
		{"margin equal to TTL", func(c *lease.Config) { c.TTL, c.SafetyMargin = time.Second, time.Second }, "SafetyMargin"},
		{"margin above TTL", func(c *lease.Config) { c.SafetyMargin = time.Minute }, "SafetyMargin"},
		{"stop timeout eats the rest", func(c *lease.Config) {
			c.TTL, c.SafetyMargin, c.StopTimeout = 10*time.Second, 5*time.Second, 5*time.Second
		}, "StopTimeout"},
		{"no time left to renew", func(c *lease.Config) {
			c.TTL, c.SafetyMargin, c.StopTimeout = 10*time.Second, 3*time.Second, 3*time.Second
			c.RenewInterval = 5 * time.Second
		}, "SafetyMargin"},
		{"absurd TTL", func(c *lease.Config) { c.TTL = math.MaxInt64 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, lease.ErrInvalid)
			var fe *lease.FieldError
			require.True(t, errors.As(err, &fe), "%v is not a *FieldError", err)
			assert.Equal(t, tc.field, fe.Field)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestValidateDoesNotMutate(t *testing.T) {
	c := lease.Config{LeaseID: "x", OwnerID: "y"}
	before := c
	require.NoError(t, c.Validate())
	_ = c.EffectiveRenewInterval()
	assert.Equal(t, before, c)
}

// An absurd TTL saturates at the largest time instead of overflowing.
func TestExpiresAtSaturates(t *testing.T) {
	now := time.Now()
	absurd := lease.Config{TTL: math.MaxInt64}
	assert.Equal(t, now.Add(math.MaxInt64), absurd.ExpiresAt(now), "the largest TTL still fits after now")

	nearEnd := maxTime.Add(-time.Hour)
	assert.Equal(t, maxTime, lease.Config{TTL: 2 * time.Hour}.ExpiresAt(nearEnd), "saturates at the end of time")
	assert.Equal(t, maxTime, absurd.ExpiresAt(nearEnd))
	assert.Equal(t, maxTime, absurd.ExpiresAt(maxTime))

	assert.Equal(t, now.Add(time.Minute), lease.Config{TTL: time.Minute}.ExpiresAt(now), "normal TTLs add exactly")
	assert.Equal(t, now.Add(30*time.Second), lease.Config{}.ExpiresAt(now), "zero TTL means the default")
}

func TestValidityDeadlines(t *testing.T) {
	c := lease.Config{TTL: 10 * time.Second, SafetyMargin: time.Second, StopTimeout: 2 * time.Second}
	sent := time.Now()
	assert.Equal(t, sent.Add(9*time.Second), c.ValidUntil(sent))
	assert.Equal(t, sent.Add(7*time.Second), c.RenewDeadline(sent))
	assert.Equal(t, maxTime, lease.Config{TTL: math.MaxInt64}.ValidUntil(maxTime.Add(-time.Second)))
}

func TestRenewPeriod(t *testing.T) {
	for _, tc := range []struct{ interval, ttl, want time.Duration }{
		{10 * time.Second, 30 * time.Second, 10 * time.Second},
		{10 * time.Second, 4 * time.Second, 2 * time.Second}, // never past half the TTL
		{time.Second, time.Millisecond, time.Millisecond},    // at least 1 ms
		{time.Second, 0, time.Millisecond},
	} {
		assert.Equal(t, tc.want, lease.RenewPeriod(tc.interval, tc.ttl), "interval %v ttl %v", tc.interval, tc.ttl)
	}
}

func TestNewOwnerID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := lease.NewOwnerID()
		require.Regexp(t, `^runtime-[0-9a-f]{32}$`, id)
		require.False(t, seen[id], "owner IDs must be fresh")
		seen[id] = true
		require.NoError(t, lease.ValidateOwnerID(id))
	}
}

// The byte loop in ValidateLeaseID must accept exactly the NATS KV key
// grammar (nats.go jetstream/kv.go), minus leading/trailing dots and "..".
var natsKey = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

func FuzzValidateLeaseID(f *testing.F) {
	for _, s := range []string{"billing.outbox", "", ".", "a..b", "a b", "ä", "a=b/c_d-e", ">", "*", "a.", ".a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := natsKey.MatchString(id) && len(id) <= 255 &&
			!strings.HasPrefix(id, ".") && !strings.HasSuffix(id, ".") && !strings.Contains(id, "..")
		err := lease.ValidateLeaseID(id)
		if want != (err == nil) {
			t.Fatalf("ValidateLeaseID(%q) = %v, want valid=%v", id, err, want)
		}
	})
}
