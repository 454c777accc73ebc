package settings_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/service/settings"
	"github.com/asterforge/aster/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func host(name string) func() (string, error) {
	return func() (string, error) {
		if name == "" {
			return "", errors.New("no host name")
		}
		return name, nil
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		host     string
		check    func(t *testing.T, s settings.Settings)
		errorHas string
	}{
		{
			name: "in a pod", host: "service-7d9f-a",
			env: map[string]string{"POD_NAME": "service-7d9f-a", "POD_NAMESPACE": "shop", "NODE_NAME": "node-1",
				"NATS_URL": "nats://nats-0.nats:4222, nats://nats-1.nats:4222", "ASTER_REPLICAS": "3"},
			check: func(t *testing.T, s settings.Settings) {
				assert.Equal(t, "service-7d9f-a", s.Lease.OwnerID)
				assert.Equal(t, "service-7d9f-a", s.Instance)
				assert.Equal(t, map[string]string{"pod": "service-7d9f-a", "namespace": "shop", "node": "node-1"}, s.Meta)
				assert.Equal(t, []string{"nats://nats-0.nats:4222", "nats://nats-1.nats:4222"}, s.NATSURLs)
				assert.Equal(t, 3, s.Replicas)
				assert.Equal(t, settings.DefaultLease, s.Lease.LeaseID)
				assert.Equal(t, settings.DefaultBucket, s.Bucket)
				assert.Equal(t, ":8080", s.HTTPAddr)
				assert.Zero(t, s.Lease.TTL, "the default TTL")
				assert.Zero(t, s.Duration)
			},
		},
		{
			name: "outside a pod", host: "laptop",
			check: func(t *testing.T, s settings.Settings) {
				assert.True(t, strings.HasPrefix(s.Lease.OwnerID, lease.OwnerIDPrefix), s.Lease.OwnerID)
				assert.Equal(t, "laptop", s.Instance)
				assert.Equal(t, map[string]string{"host": "laptop"}, s.Meta)
				assert.Empty(t, s.NATSURLs, "an embedded server")
				assert.Equal(t, 1, s.Replicas)
			},
		},
		{
			name: "no host name either",
			check: func(t *testing.T, s settings.Settings) {
				assert.Equal(t, "unknown", s.Instance)
				assert.Empty(t, s.Meta)
			},
		},
		{
			name: "flags win over the environment", host: "h",
			args: []string{"-lease", "billing.outbox", "-ttl", "10s", "-http", "127.0.0.1:9090", "-duration", "1m", "-bucket", "b"},
			env:  map[string]string{"ASTER_LEASE": "other", "ASTER_TTL": "20s", "HTTP_ADDR": ":1", "ASTER_DURATION": "1s"},
			check: func(t *testing.T, s settings.Settings) {
				assert.Equal(t, "billing.outbox", s.Lease.LeaseID)
				assert.Equal(t, 10*time.Second, s.Lease.TTL)
				assert.Equal(t, "127.0.0.1:9090", s.HTTPAddr)
				assert.Equal(t, time.Minute, s.Duration)
				assert.Equal(t, "b", s.Bucket)
			},
		},
		{name: "bad TTL", env: map[string]string{"ASTER_TTL": "soon"}, errorHas: `ASTER_TTL="soon"`},
		{name: "bad replicas", env: map[string]string{"ASTER_REPLICAS": "three"}, errorHas: "ASTER_REPLICAS"},
		{name: "replicas need a cluster", args: []string{"-replicas", "3"}, errorHas: "-replicas above 1 needs -nats-url"},
		{name: "replicas out of range", args: []string{"-replicas", "7"}, errorHas: "between 1 and 5"},
		{name: "TTL too short for the lease", args: []string{"-ttl", "1ms"}, errorHas: "SafetyMargin"},
		{name: "stray argument", args: []string{"now"}, errorHas: "unexpected arguments"},
		{name: "bad pod name", env: map[string]string{"POD_NAME": "a b"}, errorHas: "OwnerID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := settings.Parse(tc.args, func(k string) string { return tc.env[k] }, host(tc.host), io.Discard)
			if tc.errorHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errorHas)
				return
			}
			require.NoError(t, err)
			tc.check(t, s)
		})
	}
}

// TestGracePeriod checks the arithmetic deploy/kubernetes and
// docs/operations.md spell out, from lease.Config's defaults.
func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		ttl                    time.Duration
		op, resign, run, grace time.Duration
	}{
		// TTL 30 s: renew period min(max(30/3, 1), 30/2) = 10 s, stop
		// timeout 30/10 = 3 s. Resign 10+3+10 = 23 s; Run's shutdown
		// 2×10 + 2×3 + 1 = 27 s; + store 5 s + HTTP 1 s + slack 2 s.
		{ttl: 0, op: 10 * time.Second, resign: 23 * time.Second, run: 27 * time.Second, grace: 58 * time.Second},
		// TTL 10 s: 3.33 s and 1 s.
		{ttl: 10 * time.Second, op: 3333333333, resign: 7666666666, run: 9666666666, grace: 25333333332},
	} {
		c := lease.Config{LeaseID: "l", OwnerID: "o", TTL: tc.ttl}
		assert.Equal(t, tc.op, settings.OpTimeout(c), "TTL %v", tc.ttl)
		assert.Equal(t, tc.resign, settings.ResignTimeout(c), "TTL %v", tc.ttl)
		assert.Equal(t, tc.run, settings.SupervisorShutdown(c), "TTL %v", tc.ttl)
		assert.Equal(t, tc.grace, settings.GracePeriod(c), "TTL %v", tc.ttl)
		assert.Equal(t, tc.grace, settings.HoldOff(c))
	}
}
