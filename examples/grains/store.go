package main

import (
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/lease"
)

// store is the downstream store of the counters: a fence and a count per
// identity, and the history it checks the verdict on.
type store struct {
	mu      sync.Mutex
	fences  map[string]*lease.Fence
	counts  map[string]int64
	highest map[string]lease.Token // the highest token the store accepted, checked apart from the fence
	stale   int                    // writes accepted below the highest accepted: must stay 0
	refused int
	spans   map[string][]span
	names   map[string]string
}

// span is one message a grain handled.
type span struct {
	tenure     lease.Tenure
	start, end time.Time
}

func newStore() *store {
	return &store{fences: map[string]*lease.Fence{}, counts: map[string]int64{}, highest: map[string]lease.Token{},
		spans: map[string][]span{}, names: map[string]string{}}
}

func (s *store) name(id, name string) {
	s.mu.Lock()
	s.names[id] = name
	s.mu.Unlock()
}

// props is the counter grain: each message increments its identity's count
// in the store, fenced with the activation's tenure.
func (s *store) props() *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); !ok {
			return
		}
		a, ok := grains.ActivationOf(c)
		if !ok {
			return
		}
		start := time.Now()
		t, err := a.Tenure()
		if err != nil {
			return
		}
		n, err := s.write(a.Identity(), t)
		s.mu.Lock()
		s.spans[a.Identity()] = append(s.spans[a.Identity()], span{tenure: t, start: start, end: time.Now()})
		s.mu.Unlock()
		if err == nil {
			c.Respond(&wrapperspb.Int64Value{Value: n})
		}
	})
}

func (s *store) write(id string, t lease.Tenure) (int64, error) {
	s.mu.Lock()
	f := s.fences[id]
	if f == nil {
		f = &lease.Fence{}
		s.fences[id] = f
	}
	s.mu.Unlock()
	var n int64
	err := f.Do(t, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if t.Token < s.highest[id] {
			s.stale++
		}
		s.highest[id] = max(s.highest[id], t.Token)
		s.counts[id]++
		n = s.counts[id]
		return nil
	})
	if err != nil {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
	}
	return n, err
}

func (s *store) refusedWrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// verdict counts the spans that began while a span of another activation
// of the same identity had not ended, the stale writes accepted, and the identities
// that had more than one activation.
func (s *store) verdict() (dups, stale, moved int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.spans {
		sorted := slices.Clone(ss)
		slices.SortFunc(sorted, func(a, b span) int { return a.start.Compare(b.start) })
		ends := map[lease.Tenure]time.Time{} // the latest end of each tenure's spans so far
		for _, sp := range sorted {
			for t, end := range ends {
				if t != sp.tenure && end.After(sp.start) {
					dups++
				}
			}
			if sp.end.After(ends[sp.tenure]) {
				ends[sp.tenure] = sp.end
			}
		}
		if len(ends) > 1 {
			moved++
		}
	}
	return dups, s.stale, moved
}
