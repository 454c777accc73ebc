package monitor

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Store is what a Registry reads of a lease store (*natsstore.Store): why
// it stopped for good (its bucket deleted, re-created or edited, a sequence
// regression), nil while it works.
type Store interface {
	Err() error
}

// AddStore reports on s under name (which store of the process it is: its
// bucket, say). A store that stopped makes the process not ready: every
// lease on it fails until the instance is restarted.
func (r *Registry) AddStore(name string, s Store) {
	e := r.store(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.s = s
}

// StoreEvent counts ev, an event the store called name reported, by its
// type: wire it to the store's event hook, as in
//
//	natsstore.Config{OnEvent: func(ev natsstore.Event) { reg.StoreEvent("leases", ev) }}
//
// The report shows each type's count and its last event, and the
// MetricStoreEvents instrument counts them. It never blocks.
func (r *Registry) StoreEvent(name string, ev fmt.Stringer) {
	if ev == nil {
		return
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", ev), "*")
	e := r.store(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.events[kind]
	if c == nil {
		c = &EventCount{Kind: kind}
		e.events[kind] = c
	}
	c.Count++
	c.Last, c.At = ev.String(), time.Now()
}

// store returns the entry of the store called name, adding it if needed.
func (r *Registry) store(name string) *storeEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.stores {
		if e.name == name {
			return e
		}
	}
	e := &storeEntry{name: name, events: map[string]*EventCount{}}
	r.stores = append(r.stores, e)
	return e
}

type storeEntry struct {
	name   string
	mu     sync.Mutex
	s      Store // nil if only events were reported
	events map[string]*EventCount
}

func (e *storeEntry) report() StoreReport {
	e.mu.Lock()
	s := e.s
	e.mu.Unlock()
	rep := StoreReport{Name: e.name, Events: e.counts()}
	if s != nil {
		if err := s.Err(); err != nil {
			rep.Error = err.Error()
		}
	}
	return rep
}

// counts returns the event counts, by kind.
func (e *storeEntry) counts() []EventCount {
	e.mu.Lock()
	var out []EventCount
	for _, c := range e.events {
		out = append(out, *c)
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b EventCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// StoreReport is a store's state and the events it reported.
type StoreReport struct {
	Name string `json:"name"`
	// Error says why the store stopped; "" while it works (or when only
	// its events are reported).
	Error  string       `json:"error,omitempty"`
	Events []EventCount `json:"events,omitempty"`
}

// EventCount is how many events of one type a store reported, and the
// last of them.
type EventCount struct {
	Kind  string    `json:"kind"` // the event's Go type, as "natsstore.WatchStalled"
	Count int64     `json:"count"`
	Last  string    `json:"last"`
	At    time.Time `json:"at"`
}
