package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// SupervisorConfig describes a LeaseSupervisor. Lease, Store and Workload
// are required; every other zero value works.
type SupervisorConfig struct {
	// Lease names the lease and says how it is kept; see lease.Config.
	Lease lease.Config
	// Store keeps the lease. If it is also a lease.Watcher, standbys wake on
	// its watch and take over at once after a release or expiry.
	Store lease.Store
	// Workload is what runs while the lease is held.
	Workload Workload
	// Meta is published with the lease while this instance holds it (an
	// address, a pod name, a version), like etcd's campaign value: any
	// process can read who leads and how to reach it. See lease.ValidateMeta
	// for its limits.
	Meta map[string]string
	// Restart says how the supervisor goes back to standby after a term
	// ends by poison or by the workload's exit, and when it gives up.
	Restart RestartPolicy
	// Logger receives the supervisor's records, with lease_id, owner_id
	// and (while leading) token attributes. nil discards them.
	Logger *slog.Logger
	// OnEvent, when not nil, receives every Event, on the reporting actor's
	// goroutine: the supervisor's and its Watchdog's may call it
	// concurrently. It must not block.
	OnEvent func(Event)
	// MeterProvider receives the lease's instruments, named aster.lease.*,
	// in scope github.com/asterforge/aster/actors, each measurement with the
	// lease_id attribute; docs/operations.md lists them. nil means a no-op
	// provider.
	MeterProvider metric.MeterProvider
}

// RestartPolicy is the LeaseSupervisor's restart strategy, in the
// vocabulary of package supervision (after OTP): a term that ends by a loss
// or a failure is a restart. Before standing by again the supervisor waits
// Backoff; one restart more than Intensity within Period escalates the
// failure to the parent (Run returns it). A term that steps down is no
// restart. The zero value works: supervision.Backoff's defaults (100 ms
// doubling up to 30 s, full jitter) and at most 5 restarts in a minute.
//
// The defaults differ from a supervision tree's (3 in 5 s) because a lease's
// terms end on store outages too, and a server restart or a stream leader's
// failover takes seconds: 5 in a minute rides them out.
type RestartPolicy struct {
	Backoff supervision.Backoff
	// Intensity is the number of restarts allowed within Period; one more
	// escalates. 0 means 5; supervision.NoRestarts escalates the first;
	// supervision.Unlimited never escalates.
	Intensity int
	Period    time.Duration // 0 means 1 minute
}

// Defaults of RestartPolicy.
const (
	defaultRestartIntensity = 5
	defaultRestartPeriod    = time.Minute
)

// backoff is the Policy of p's Backoff (Immediate is handled by restart).
func (p RestartPolicy) backoff() backoff.Policy {
	b := p.Backoff
	return backoff.Policy{Base: b.Base, Cap: b.Cap, Multiplier: b.Multiplier, ResetAfter: b.ResetAfter,
		Jitter: backoff.Jitter(b.Jitter)}
}

func (p RestartPolicy) intensity() int {
	switch {
	case p.Intensity == 0:
		return defaultRestartIntensity
	case p.Intensity < 0:
		return 0
	default:
		return p.Intensity
	}
}

func (p RestartPolicy) period() time.Duration {
	if p.Period <= 0 {
		return defaultRestartPeriod
	}
	return p.Period
}

// Validate reports the first problem with p; it matches lease.ErrInvalid.
func (p RestartPolicy) Validate() error {
	if p.Period < 0 {
		return &lease.FieldError{Field: "Restart.Period", Reason: "must not be negative, got " + p.Period.String()}
	}
	if err := p.backoff().Validate(); err != nil {
		return &lease.FieldError{Field: "Restart", Reason: err.Error()}
	}
	return nil
}

// Validate reports the first problem with c; it matches lease.ErrInvalid.
func (c SupervisorConfig) Validate() error {
	if err := c.Lease.Validate(); err != nil {
		return err
	}
	if c.Store == nil {
		return &lease.FieldError{Field: "Store", Reason: "must not be nil"}
	}
	if c.Workload == nil {
		return &lease.FieldError{Field: "Workload", Reason: "must not be nil"}
	}
	if err := c.Workload.validate(); err != nil {
		return err
	}
	if err := lease.ValidateMeta(c.Meta); err != nil {
		return err
	}
	return c.Restart.Validate()
}

// fatalStoreError reports errors that retrying an acquisition cannot fix.
func fatalStoreError(err error) bool {
	return errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed) || errors.Is(err, ErrStoreStopped)
}

// stoppedStore is what a store that can stop for good tells of it
// (natsstore.Store): the error it stopped with, nil while it works.
type stoppedStore interface {
	Err() error
}

// storeStopped returns err wrapped in ErrStoreStopped when it says that
// store stopped for good: err matches lease.ErrStoreConfig and the store's
// Err reports a stop. Otherwise it returns err. An ErrStoreConfig from a
// store that does not say it stopped may be fixed by an operator: it is
// retried.
func storeStopped(store lease.Store, err error) error {
	if err == nil || errors.Is(err, ErrStoreStopped) || !errors.Is(err, lease.ErrStoreConfig) {
		return err
	}
	if s, ok := store.(stoppedStore); ok && s.Err() != nil {
		return fmt.Errorf("%w: %w", ErrStoreStopped, err)
	}
	return err
}

// tooManyRestarts is the error a supervisor escalates.
func tooManyRestarts(n int, within time.Duration, last error) error {
	return fmt.Errorf("%w: %d within %v; last: %w", ErrTooManyRestarts, n, within, last)
}
