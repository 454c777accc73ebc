// Package backoff computes restart and retry delays: exponential growth from
// a base, a cap, jitter, and a reset after a stable period.
//
// It replaces protoactor-go's exponential backoff, which grows linearly, has
// nanoseconds of jitter, no cap, and keeps unbounded statistics.
package backoff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Jitter says how a delay is randomised below its exponential ceiling.
type Jitter uint8

const (
	// Full draws the delay uniformly from [0, ceiling]: the best spread for
	// many instances retrying at once. It is the zero value.
	Full Jitter = iota
	// Equal draws from [ceiling/2, ceiling]: spread, with a floor.
	Equal
	// None uses the ceiling itself; for tests and reports.
	None
)

// Defaults for a zero Policy.
const (
	DefaultBase       = 100 * time.Millisecond
	DefaultCap        = 30 * time.Second
	DefaultMultiplier = 2.0
)

// Policy describes a backoff schedule. The zero value is usable: 100 ms
// doubling up to 30 s, full jitter, reset after a stable period of twice
// the cap.
type Policy struct {
	Base       time.Duration // first ceiling; 0 means 100 ms
	Cap        time.Duration // largest ceiling; 0 means 30 s
	Multiplier float64       // growth per attempt; 0 means 2
	Jitter     Jitter
	// ResetAfter is how long a restarted thing must run without failing
	// before the schedule starts again from Base. 0 means 2 * Cap.
	ResetAfter time.Duration
}

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("backoff: invalid policy")

// Validate reports negative durations, a multiplier below 1 and a cap below
// the base.
func (p Policy) Validate() error {
	switch {
	case p.Base < 0 || p.Cap < 0 || p.ResetAfter < 0:
		return fmt.Errorf("%w: durations must not be negative (base %v, cap %v, reset after %v)",
			ErrInvalid, p.Base, p.Cap, p.ResetAfter)
	case p.Multiplier != 0 && (p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0)):
		return fmt.Errorf("%w: multiplier %v must be at least 1", ErrInvalid, p.Multiplier)
	case p.Jitter > None:
		return fmt.Errorf("%w: unknown jitter %d", ErrInvalid, p.Jitter)
	}
	if p.cap() < p.base() {
		return fmt.Errorf("%w: cap %v is below the base %v", ErrInvalid, p.cap(), p.base())
	}
	return nil
}

func (p Policy) base() time.Duration { return cmpOr(p.Base, DefaultBase) }
func (p Policy) cap() time.Duration  { return cmpOr(p.Cap, DefaultCap) }

func (p Policy) resetAfter() time.Duration {
	if p.ResetAfter > 0 {
		return p.ResetAfter
	}
	return 2 * p.cap()
}

func (p Policy) multiplier() float64 {
	if p.Multiplier == 0 {
		return DefaultMultiplier
	}
	return p.Multiplier
}

// Ceiling returns the un-jittered delay before retry number attempt
// (0-based): min(Cap, Base * Multiplier^attempt), without overflow.
func (p Policy) Ceiling(attempt int) time.Duration {
	limit := p.cap()
	if attempt <= 0 {
		return min(p.base(), limit)
	}
	d := float64(p.base()) * math.Pow(p.multiplier(), float64(attempt))
	if math.IsInf(d, 0) || math.IsNaN(d) || d >= float64(limit) {
		return limit
	}
	return time.Duration(d)
}

// Delay returns the jittered delay before retry number attempt, drawing from
// r (nil means the global source).
func (p Policy) Delay(attempt int, r *rand.Rand) time.Duration {
	c := p.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	switch p.Jitter {
	case None:
		return c
	case Equal:
		return c/2 + randN(r, c/2+1)
	default:
		return randN(r, c+1)
	}
}

func randN(r *rand.Rand, n time.Duration) time.Duration {
	if r == nil {
		return rand.N(n)
	}
	return time.Duration(r.Int64N(int64(n)))
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Backoff tracks one restartable thing: how many times in a row it failed
// without a stable period in between. The zero value is ready to use. It is
// not safe for concurrent use; an actor owns it.
type Backoff struct {
	Policy Policy
	Rand   *rand.Rand // nil means the global source

	attempt   int
	startedAt time.Time
}

// Started records that the thing (re)started at now.
func (b *Backoff) Started(now time.Time) { b.startedAt = now }

// Failed records a failure at now and returns the delay before the next
// start. A failure more than ResetAfter after the last start counts as the
// first of a new series.
func (b *Backoff) Failed(now time.Time) time.Duration {
	if !b.startedAt.IsZero() && now.Sub(b.startedAt) >= b.Policy.resetAfter() {
		b.attempt = 0
	}
	d := b.Policy.Delay(b.attempt, b.Rand)
	if b.attempt < math.MaxInt32 {
		b.attempt++
	}
	return d
}

// Attempt returns the number of failures in the current series.
func (b *Backoff) Attempt() int { return b.attempt }

// Reset starts the series again from Base.
func (b *Backoff) Reset() { b.attempt = 0 }
