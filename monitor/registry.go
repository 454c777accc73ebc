package monitor

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/supervision"
)

// Config configures a Registry. The zero value works.
type Config struct {
	// Instance names this process for operators: a pod name, a host name.
	// "" means the host name.
	Instance string
	// RenewalGrace is how long past its validity a supervisor may still
	// claim to lead before the process counts as not live. 0 means none:
	// a supervisor stops its workload and gives its lease up before its
	// validity ends, so one that still leads after it is stuck.
	RenewalGrace time.Duration
}

// Supervisor is what a Registry reads of a lease supervisor
// (*actors.LeaseSupervisor).
type Supervisor interface {
	Status() actors.Status
	// Tree returns the supervision tree the current term runs as its
	// workload, or nil.
	Tree() *supervision.Tree
}

// Tree is what a Registry reads of a supervision tree (*supervision.Tree).
type Tree interface {
	Snapshot() supervision.Snapshot
}

// Locker is what a Registry reads of a lock.Locker.
type Locker interface {
	Held() int
}

// Fleet is what a Registry reads of a sharded fleet's member
// (*shard.Host).
type Fleet interface {
	Status() shard.Status
}

// Registry holds the supervisors, trees and lockers of a process and
// reports on them. It is safe for concurrent use.
type Registry struct {
	cfg      Config
	instance string

	mu      sync.Mutex
	sups    []supEntry
	trees   []Tree
	lockers []lockerEntry
	fleets  []Fleet
	stores  []*storeEntry
}

type lockerEntry struct {
	name string
	l    Locker
}

type supEntry struct {
	sup Supervisor
}

// New returns an empty Registry.
func New(cfg Config) *Registry {
	r := &Registry{cfg: cfg, instance: cfg.Instance}
	if r.instance == "" {
		r.instance, _ = os.Hostname()
		if r.instance == "" {
			r.instance = "unknown"
		}
	}
	return r
}

// Instance returns the name of this process.
func (r *Registry) Instance() string { return r.instance }

// AddSupervisor reports on sup (an *actors.LeaseSupervisor), and on the
// tree its current term runs as its workload (actors.WorkloadTree), if any.
func (r *Registry) AddSupervisor(sup Supervisor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sups = append(r.sups, supEntry{sup: sup})
}

// AddTree reports on a supervision tree run on its own.
func (r *Registry) AddTree(t Tree) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trees = append(r.trees, t)
}

// AddLocker reports on the locks l holds, under name (which Locker of the
// process it is: what it guards, or the owner ID it writes).
func (r *Registry) AddLocker(name string, l Locker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lockers = append(r.lockers, lockerEntry{name: name, l: l})
}

// AddFleet reports on f (a *shard.Host): its state, its view of the fleet
// and the supervisors of the shards it runs (Host.Status).
func (r *Registry) AddFleet(f Fleet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fleets = append(r.fleets, f)
}

// Report is the state of a process at one moment. It marshals to JSON; its
// times are on the process's clock.
type Report struct {
	Instance string    `json:"instance"`
	Time     time.Time `json:"time"`
	// Live and Ready are the health verdicts (a process that is not live
	// is not ready either); Problems says what makes them false.
	Live     bool          `json:"live"`
	Ready    bool          `json:"ready"`
	Problems []Problem     `json:"problems,omitempty"`
	Leases   []LeaseReport `json:"leases,omitempty"`
	Locks    []LockReport  `json:"locks,omitempty"`
	Trees    []TreeReport  `json:"trees,omitempty"`
	// Fleets are the statuses of the sharded fleets' Hosts.
	Fleets []shard.Status `json:"fleets,omitempty"`
	// Stores are the lease stores (AddStore) and the events they
	// reported (StoreEvent).
	Stores []StoreReport `json:"stores,omitempty"`
}

// LeaseReport is a lease supervisor's Status, with the snapshot of the tree
// it runs as its workload.
type LeaseReport struct {
	actors.Status
	// Holder is Status.Holder in JSON with lower-case keys (while
	// standing by: who holds the lease).
	Holder *Holder `json:"holder,omitempty"`
	// Tree is the workload tree's snapshot, if the supervisor runs one.
	Tree *TreeReport `json:"tree,omitempty"`
}

// Holder is who holds a lease, as a report shows it.
type Holder struct {
	OwnerID string            `json:"owner_id"`
	Term    string            `json:"term,omitempty"`
	Token   uint64            `json:"token,omitempty"`
	TTL     string            `json:"ttl,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// LockReport is the locks one Locker holds.
type LockReport struct {
	Name string `json:"name"`
	Held int    `json:"held"`
}

// TreeReport is a supervision tree's snapshot, as JSON and as the text
// tree Snapshot.String prints.
type TreeReport struct {
	Name     string               `json:"name"`
	Snapshot supervision.Snapshot `json:"snapshot"`
	Text     string               `json:"text"`
}

// Report returns the state of everything registered, with the health
// verdict.
func (r *Registry) Report() Report {
	r.mu.Lock()
	sups, trees, lockers, fleets := slices.Clone(r.sups), slices.Clone(r.trees), slices.Clone(r.lockers), slices.Clone(r.fleets)
	stores := slices.Clone(r.stores)
	r.mu.Unlock()

	rep := Report{Instance: r.instance, Time: time.Now()}
	for _, e := range sups {
		lr := LeaseReport{Status: e.sup.Status()}
		if h := lr.Status.Holder; h.OwnerID != "" || h.Token != 0 {
			lr.Holder = &Holder{OwnerID: h.OwnerID, Term: h.Term, Token: uint64(h.Token), Meta: h.Meta}
			if h.TTL > 0 {
				lr.Holder.TTL = h.TTL.String()
			}
		}
		if t := e.sup.Tree(); t != nil {
			tr := treeReport(t)
			lr.Tree = &tr
		}
		rep.Leases = append(rep.Leases, lr)
	}
	for _, e := range lockers {
		rep.Locks = append(rep.Locks, LockReport{Name: e.name, Held: e.l.Held()})
	}
	for _, t := range trees {
		rep.Trees = append(rep.Trees, treeReport(t))
	}
	for _, f := range fleets {
		rep.Fleets = append(rep.Fleets, f.Status())
	}
	for _, e := range stores {
		rep.Stores = append(rep.Stores, e.report())
	}
	rep.Problems = assess(rep, r.cfg.RenewalGrace)
	rep.Live, rep.Ready = true, true
	for _, p := range rep.Problems {
		switch p.Check {
		case CheckLive:
			rep.Live = false
		case CheckReady:
			rep.Ready = false
		}
	}
	rep.Ready = rep.Ready && rep.Live // a process that is not live is not ready either
	return rep
}

func treeReport(t Tree) TreeReport {
	s := t.Snapshot()
	return TreeReport{Name: s.Name, Snapshot: s, Text: strings.TrimSuffix(s.String(), "\n")}
}
