package shard

import "errors"

// Errors reported by a Host. Check them with errors.Is. Configuration errors
// match lease.ErrInvalid; a shard's workload sees actors.ErrResigned when its
// shard is handed over and supervision.ErrShutdown when the Host stops.
var (
	// ErrAlreadyRunning is returned by Host.Run while another Run of the
	// same Host is under way: a Host is one member of the fleet.
	ErrAlreadyRunning = errors.New("shard: the host is already running")

	// ErrInactive is returned by Host.Drain when the Host does not run.
	ErrInactive = errors.New("shard: the host does not run")

	// ErrHandoverFailed reports shards that were not handed over cleanly:
	// a workload that did not stop in time (its lease then expires at the
	// store, and the shard moves after its TTL), or a release that failed.
	// It wraps the causes.
	ErrHandoverFailed = errors.New("shard: handover failed")
)
