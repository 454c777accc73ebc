//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/lease"
)

// storeSubject is where the members send their writes; the parent answers.
const storeSubject = "example.grains.store"

// writeReq is one write of a counter grain: its identity, the member it
// runs on, the activation's tenure and the member's clock when it sent the
// write (Unix nanoseconds).
type writeReq struct {
	ID     string      `json:"id"`
	Member string      `json:"member"`
	Token  lease.Token `json:"token"`
	Term   string      `json:"term"`
	Sent   int64       `json:"sent"`
}

// writeAns is the store's answer: the identity's count after the write,
// or Refused when the fence refused the tenure.
type writeAns struct {
	N       int64 `json:"n,omitempty"`
	Refused bool  `json:"refused,omitempty"`
}

// store is the downstream store of the counters, in the parent process: a
// fence and a count per identity, and the history it checks the verdict
// on.
type store struct {
	mu      sync.Mutex
	fences  map[string]*lease.Fence
	counts  map[string]int64
	highest map[string]lease.Token   // the highest token the store accepted, checked apart from the fence
	stale   int                      // writes accepted below the highest accepted: must stay 0
	refused map[string]int           // writes the fence refused, per member
	acts    map[string][]*activation // per identity, in the order they first wrote
	writes  map[string]int           // writes accepted, per member
}

// activation is one activation of an identity, told apart by its term: the
// member it ran on, its token, and the Sent of its first and last accepted
// write (the interval it acted in).
type activation struct {
	term, member string
	token        lease.Token
	first, last  int64
}

func newStore() *store {
	return &store{fences: map[string]*lease.Fence{}, counts: map[string]int64{}, highest: map[string]lease.Token{},
		acts: map[string][]*activation{}, writes: map[string]int{}, refused: map[string]int{}}
}

// serve answers the members' writes on nc until the subscription ends.
func (s *store) serve(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.Subscribe(storeSubject, func(msg *nats.Msg) {
		var w writeReq
		if err := json.Unmarshal(msg.Data, &w); err != nil {
			return
		}
		n, err := s.write(w)
		b, _ := json.Marshal(writeAns{N: n, Refused: err != nil})
		_ = msg.Respond(b)
	})
}

// write increments the identity's count if the fence accepts the tenure.
func (s *store) write(w writeReq) (int64, error) {
	s.mu.Lock()
	f := s.fences[w.ID]
	if f == nil {
		f = &lease.Fence{}
		s.fences[w.ID] = f
	}
	s.mu.Unlock()
	var n int64
	err := f.Do(lease.Tenure{Token: w.Token, Term: w.Term}, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.Token < s.highest[w.ID] {
			s.stale++
		}
		s.highest[w.ID] = max(s.highest[w.ID], w.Token)
		s.counts[w.ID]++
		n = s.counts[w.ID]
		s.acted(w)
		return nil
	})
	if err != nil {
		s.mu.Lock()
		s.refused[w.Member]++
		s.mu.Unlock()
	}
	return n, err
}

// acted widens the interval of the write's activation; s.mu is held.
func (s *store) acted(w writeReq) {
	s.writes[w.Member]++
	for _, a := range s.acts[w.ID] {
		if a.term == w.Term {
			a.first, a.last = min(a.first, w.Sent), max(a.last, w.Sent)
			return
		}
	}
	s.acts[w.ID] = append(s.acts[w.ID], &activation{term: w.Term, member: w.Member, token: w.Token, first: w.Sent, last: w.Sent})
}

// accepted lists the writes accepted, per member.
func (s *store) accepted() string { return s.list(s.writes) }

// refusedWrites lists the writes the fence refused, per member.
func (s *store) refusedWrites() string {
	if r := s.list(s.refused); r != "" {
		return r
	}
	return "none"
}

func (s *store) list(per map[string]int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(per)) {
		parts = append(parts, fmt.Sprintf("%s %d", m, per[m]))
	}
	return strings.Join(parts, ", ")
}

// verdict counts the pairs of activations of one identity whose intervals
// overlap (duplicate activations: both acted at once), the stale writes
// accepted, and the identities that had more than one activation.
func (s *store) verdict() (dups, stale, moved int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, as := range s.acts {
		if len(as) > 1 {
			moved++
		}
		for i, a := range as {
			for _, b := range as[i+1:] {
				if a.first <= b.last && b.first <= a.last {
					dups++
				}
			}
		}
	}
	return dups, s.stale, moved
}
