package actors

import "errors"

// Errors reported by the lease actors. Check them with errors.Is. A term's
// context is cancelled with lease.ErrLost's *lease.LostError when the lease
// is lost, with supervision.ErrShutdown on a shutdown, with ErrResigned by
// Resign, and with ErrWorkloadExited when the workload ended by itself.
var (
	// ErrWorkloadExited is the cause with which a workload's context is
	// cancelled when its term ends because it returned or its actor stopped
	// by itself, and, wrapping the workload's error, the cause of a restart
	// after a workload failed.
	ErrWorkloadExited = errors.New("actors: workload exited while leading")

	// ErrWorkloadStuck reports a workload that did not stop within its
	// StopTimeout after its context was cancelled. Its lease is neither
	// renewed nor released for it: a standby takes it over once it has gone
	// a TTL without renewal.
	ErrWorkloadStuck = errors.New("actors: workload did not stop in time")

	// ErrRunning is returned by LeaseSupervisor.Run while another Run of
	// the same LeaseSupervisor is under way: one LeaseSupervisor is one
	// candidate.
	ErrRunning = errors.New("actors: the lease supervisor is already running")

	// ErrNotRunning is returned by LeaseSupervisor.Resign when no actor of
	// the supervisor runs.
	ErrNotRunning = errors.New("actors: the lease supervisor is not running")

	// ErrResigned is the cause with which a workload's context is cancelled
	// when LeaseSupervisor.Resign steps it down.
	ErrResigned = errors.New("actors: resigned")

	// ErrTooManyRestarts is the reason a LeaseSupervisor escalates to its
	// parent (and Run returns) after more restarts within a period than its
	// RestartPolicy allows.
	ErrTooManyRestarts = errors.New("actors: too many restarts")

	// ErrNoTerm is returned by TokenFrom for a context that does not belong
	// to a workload of a LeaseSupervisor.
	ErrNoTerm = errors.New("actors: the context belongs to no lease term")

	// ErrStoreStopped reports a lease store that stopped for good: it
	// answered an error matching lease.ErrStoreConfig, and its Err method
	// reports why it stopped (a natsstore.Store whose bucket was deleted,
	// re-created or edited, or whose server lost acknowledged writes). No
	// retry can succeed until the process opens the store again, so a
	// LeaseSupervisor escalates it at once, from standby or from a term,
	// wrapping the store's error, and Run returns it: let the process exit
	// and its supervisor (or Kubernetes) restart it once the cause is fixed.
	ErrStoreStopped = errors.New("actors: the lease store stopped for good")
)
