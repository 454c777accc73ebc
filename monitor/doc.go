// Package monitor reports what a process's lease supervisors, locks,
// supervision trees and sharded fleets are doing, where operators look:
// health probes and a JSON status over HTTP, a NATS micro service that
// `nats micro ls` lists, and OpenTelemetry instruments for the trees.
//
// # Registry
//
// A Registry holds what to report on: AddSupervisor (an
// actors.LeaseSupervisor, with the tree it runs as its workload, if any),
// AddTree (a supervision.Tree run on its own), AddLocker (a lock.Locker,
// by a name), AddFleet (a shard.Host: its state, its view of the fleet
// and the supervisors of the shards it runs) and AddStore (a
// natsstore.Store, by a name: a store that stopped makes the process not
// ready). StoreEvent counts the events a store reports (wire it to
// natsstore.Config.OnEvent): watches that stalled, servers left as
// isolated, stale reads.
// Report returns the whole state at one moment: each lease's Status (leading
// or standby, term, token, validity, who else holds it, stuck workloads,
// the last error) with its tree's snapshot, the locks held, the trees'
// snapshots, the fleets' statuses (shard.Status), and the health verdict
// with the problems behind it.
//
//	reg := monitor.New(monitor.Config{Instance: podName})
//	reg.AddSupervisor(sup)
//	reg.AddLocker("invoices", locker)
//	http.Handle("/aster/", http.StripPrefix("/aster", reg.Handler()))
//	svc, err := reg.Service(nc, monitor.ServiceConfig{}) // nats micro ls
//
// # Health
//
// A process is live unless it is wedged in a way only a restart fixes: a
// supervisor that leads although its validity has passed (its renewals are
// overdue: the renewing actor is stuck; client-go's leader-election health
// check judges the same way), a workload that did not stop when its term
// ended (Status.Stuck), or a tree run on its own that failed. It is ready
// when every supervisor is a running candidate (standby, leading, stopping
// or restarting), every tree run on its own is running, and every fleet's
// Host has read the fleet's leases and not stopped. A shard's supervisor is
// judged live as any supervisor; one that gave up is quarantined by its
// Host, and an unbalanced fleet is moving: neither is a health problem. A
// workload tree's failure ends its term and the supervisor's restart policy
// answers it. Handler serves /livez (also /healthz), /readyz and /status.
//
// # NATS micro service
//
// Service registers a micro service (nats.go/micro) named "aster" whose
// every instance answers on <name>.<instance-id>.status, .leases and .tree,
// so that `nats micro ls`, `nats micro info aster` and `nats req` work, and
// `aster status` and `aster tree` find every instance.
//
// # Metrics
//
// RegisterMetrics adds observable instruments read from the trees'
// snapshots: the children by state and their restarts. The lease
// instruments are the actors package's (SupervisorConfig.MeterProvider),
// the lock instruments the lock package's (lock.Config.MeterProvider).
package monitor
