package lease

import (
	"math"
	"time"
)

// Defaults used when a Config duration is zero.
const (
	DefaultTTL                  = 30 * time.Second
	DefaultRenewInterval        = 10 * time.Second
	DefaultStandbyRetryInterval = 5 * time.Second

	// minRenewInterval is the floor of a derived renew interval.
	minRenewInterval = time.Second
	// minRenewPeriod is the floor of the watchdog's sleep between renewals.
	minRenewPeriod = time.Millisecond

	// maxLeaseIDLen bounds lease IDs so that they fit in any store's key.
	maxLeaseIDLen = 255
)

// maxTime is the time a saturated expiry is clamped to: the largest
// time.Time.
var maxTime = time.Unix(1<<63-62135596801, 999999999)

// Config describes one lease and how its owner keeps it.
//
// The zero value of every duration means "use the default"; Config is taken
// by value and never modified. Call Validate before use; the Effective
// methods apply the defaults and normalisation rules.
type Config struct {
	// LeaseID names the lease; every instance competing for it uses the same
	// ID. It must be a valid NATS KV key (letters, digits and - / _ = .; not
	// starting or ending with '.'), so that one Config works with every store.
	LeaseID string

	// OwnerID identifies this process; use NewOwnerID.
	OwnerID string

	// TTL is how long the lease survives without renewal. 0 means 30 s.
	TTL time.Duration

	// RenewInterval is how often the owner renews. 0 means max(TTL/3, 1 s);
	// a value >= TTL means max(TTL/2, 1 s). The watchdog never sleeps longer
	// than TTL/2 whatever this says.
	RenewInterval time.Duration

	// StandbyRetryInterval is how often a standby retries when the store's
	// watch is silent. 0 means 5 s. It is jittered by the caller.
	StandbyRetryInterval time.Duration

	// SafetyMargin is subtracted from the TTL to bound the owner's validity:
	// it covers the drift between this machine's clock rate and the store's.
	// 0 means TTL/10. It must be smaller than the TTL.
	SafetyMargin time.Duration

	// StopTimeout bounds how long the workload may take to stop once the
	// lease is poisoned or shut down. A failing renewal poisons the lease at
	// ValidUntil - StopTimeout so that the workload has stopped by
	// ValidUntil. 0 means TTL/10.
	StopTimeout time.Duration
}

// EffectiveTTL returns the TTL with its default applied.
func (c Config) EffectiveTTL() time.Duration {
	if c.TTL <= 0 {
		return DefaultTTL
	}
	return c.TTL
}

// EffectiveRenewInterval returns the renew interval an owner uses: 0 means
// max(TTL/3, 1 s), and an interval >= TTL, which would let the lease expire
// between two renewals, means max(TTL/2, 1 s).
func (c Config) EffectiveRenewInterval() time.Duration {
	ttl := c.EffectiveTTL()
	switch {
	case c.RenewInterval <= 0:
		return max(ttl/3, minRenewInterval)
	case c.RenewInterval >= ttl:
		return max(ttl/2, minRenewInterval)
	default:
		return c.RenewInterval
	}
}

// EffectiveStandbyRetryInterval returns the standby retry interval with its
// default applied.
func (c Config) EffectiveStandbyRetryInterval() time.Duration {
	if c.StandbyRetryInterval <= 0 {
		return DefaultStandbyRetryInterval
	}
	return c.StandbyRetryInterval
}

// EffectiveSafetyMargin returns the safety margin with its default applied.
func (c Config) EffectiveSafetyMargin() time.Duration {
	if c.SafetyMargin <= 0 {
		return c.EffectiveTTL() / 10
	}
	return c.SafetyMargin
}

// EffectiveStopTimeout returns the stop timeout with its default applied.
func (c Config) EffectiveStopTimeout() time.Duration {
	if c.StopTimeout <= 0 {
		return c.EffectiveTTL() / 10
	}
	return c.StopTimeout
}

// RenewPeriod is how long the watchdog sleeps before the next renewal of a
// lease whose TTL is ttl: min(interval, ttl/2), and at least 1 ms. It is
// re-derived every tick because the TTL can change (a lock's Extend).
func RenewPeriod(interval, ttl time.Duration) time.Duration {
	return max(min(interval, ttl/2), minRenewPeriod)
}

// ExpiresAt returns now + TTL, saturating at the largest time.Time instead of overflowing.
// It is for display and for stores that persist an expiry; owners judge their
// own validity with ValidUntil on the monotonic clock.
func (c Config) ExpiresAt(now time.Time) time.Time {
	return addSat(now, c.EffectiveTTL())
}

// ValidUntil returns until when an owner whose last successful acquire or
// renew was sent at sent may act: sent + TTL - SafetyMargin. Pass a time
// from time.Now, so that the comparison uses the monotonic clock.
func (c Config) ValidUntil(sent time.Time) time.Time {
	return addSat(sent, c.EffectiveTTL()-c.EffectiveSafetyMargin())
}

// RenewDeadline returns the moment at which an owner that has not managed
// to renew since sent must give up: ValidUntil(sent) - StopTimeout, which
// leaves the workload StopTimeout to stop before its validity ends.
func (c Config) RenewDeadline(sent time.Time) time.Time {
	return addSat(sent, c.EffectiveTTL()-c.EffectiveSafetyMargin()-c.EffectiveStopTimeout())
}

// Validate reports the first problem with c as a *FieldError that names the
// field; it matches ErrInvalid.
func (c Config) Validate() error {
	if err := ValidateLeaseID(c.LeaseID); err != nil {
		return err
	}
	if err := ValidateOwnerID(c.OwnerID); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"TTL", c.TTL},
		{"RenewInterval", c.RenewInterval},
		{"StandbyRetryInterval", c.StandbyRetryInterval},
		{"SafetyMargin", c.SafetyMargin},
		{"StopTimeout", c.StopTimeout},
	} {
		if d.v < 0 {
			return invalid(d.name, "must not be negative, got %v", d.v)
		}
	}
	ttl, margin, stop := c.EffectiveTTL(), c.EffectiveSafetyMargin(), c.EffectiveStopTimeout()
	if margin >= ttl {
		return invalid("SafetyMargin", "%v must be smaller than the TTL %v", margin, ttl)
	}
	if stop >= ttl-margin {
		return invalid("StopTimeout", "%v must be smaller than TTL - SafetyMargin (%v)", stop, ttl-margin)
	}
	if period := RenewPeriod(c.EffectiveRenewInterval(), ttl); period >= ttl-margin-stop {
		return invalid("SafetyMargin",
			"TTL %v - SafetyMargin %v - StopTimeout %v leaves no time for a renewal every %v",
			ttl, margin, stop, period)
	}
	return nil
}

// isKey reports whether id matches the NATS KV key grammar
// `^[-/_=\.a-zA-Z0-9]+$` (nats.go jetstream/kv.go), without a regexp: it
// runs on every store operation.
func isKey(id string) bool {
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '/' || c == '_' || c == '=' || c == '.':
		default:
			return false
		}
	}
	return id != ""
}

// ValidateLeaseID reports whether id can name a lease in every store: a
// non-empty NATS KV key of at most 255 bytes.
func ValidateLeaseID(id string) error {
	switch {
	case id == "":
		return invalid("LeaseID", "must not be empty")
	case len(id) > maxLeaseIDLen:
		return invalid("LeaseID", "is %d bytes long, at most %d allowed", len(id), maxLeaseIDLen)
	case !isKey(id):
		return invalid("LeaseID", "%q: only letters, digits and - / _ = . are allowed", id)
	case id[0] == '.' || id[len(id)-1] == '.':
		return invalid("LeaseID", "%q must not start or end with '.'", id)
	}
	for i := 1; i < len(id); i++ {
		if id[i] == '.' && id[i-1] == '.' {
			return invalid("LeaseID", "%q must not contain an empty token (\"..\")", id)
		}
	}
	return nil
}

// ValidateOwnerID reports whether id can name an owner: non-empty, at most
// 255 bytes, printable ASCII without spaces.
func ValidateOwnerID(id string) error {
	switch {
	case id == "":
		return invalid("OwnerID", "must not be empty")
	case len(id) > maxLeaseIDLen:
		return invalid("OwnerID", "is %d bytes long, at most %d allowed", len(id), maxLeaseIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return invalid("OwnerID", "%q: only printable ASCII without spaces is allowed", id)
		}
	}
	return nil
}

// addSat returns t + d, clamped to maxTime instead of overflowing, and t
// itself when d is not positive.
func addSat(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return t
	}
	// Sub saturates at MaxInt64, which is then no bound on d.
	if left := maxTime.Sub(t); left <= d && left != math.MaxInt64 {
		return maxTime
	}
	return t.Add(d)
}
