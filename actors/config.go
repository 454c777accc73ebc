package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
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
	// MeterProvider receives the lease's instruments: counters of
	// acquisitions, renewals, renewal failures, losses and handovers, the
	// leader gauge and the validity histogram (see MetricLeader and the
	// other Metric names). nil means a no-op provider.
	MeterProvider metric.MeterProvider
}

// RestartPolicy is the LeaseSupervisor's restart strategy, after OTP: a
// term that ends by poison or by the workload's exit is a restart. Before
// standing by again the supervisor waits an exponential backoff with full
// jitter and a cap, which starts again from Base once a term has lasted
// ResetAfter. More than MaxRestarts restarts within Within escalate the
// failure to the parent (Run returns it). The zero value works.
type RestartPolicy struct {
	Base       time.Duration // first backoff ceiling; 0 means 100 ms
	Cap        time.Duration // largest backoff ceiling; 0 means 30 s
	ResetAfter time.Duration // a term this long resets the backoff; 0 means 2*Cap
	// MaxRestarts is the number of restarts allowed within Within; one
	// more escalates. 0 means 5; a negative value never escalates.
	MaxRestarts int
	Within      time.Duration // 0 means 1 minute
}

// Defaults of RestartPolicy.
const (
	DefaultMaxRestarts   = 5
	DefaultRestartWithin = time.Minute
)

func (p RestartPolicy) backoff() backoff.Policy {
	return backoff.Policy{Base: p.Base, Cap: p.Cap, ResetAfter: p.ResetAfter, Jitter: backoff.Full}
}

func (p RestartPolicy) maxRestarts() int {
	if p.MaxRestarts == 0 {
		return DefaultMaxRestarts
	}
	return p.MaxRestarts
}

func (p RestartPolicy) within() time.Duration {
	if p.Within <= 0 {
		return DefaultRestartWithin
	}
	return p.Within
}

// Validate reports the first problem with p; it matches lease.ErrInvalid.
func (p RestartPolicy) Validate() error {
	if p.Within < 0 {
		return &lease.FieldError{Field: "Restart.Within", Reason: "must not be negative, got " + p.Within.String()}
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
	return errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed)
}

// tooManyRestarts is the error a supervisor escalates.
func tooManyRestarts(n int, within time.Duration, last error) error {
	return fmt.Errorf("%w: %d within %v; last: %w", ErrTooManyRestarts, n, within, last)
}
