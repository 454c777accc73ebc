package leasetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// brokenStore wraps a MemStore and breaks one rule of the contract.
type brokenStore struct {
	*leasetest.MemStore
	kind  string
	first map[string]lease.Token // reuse-tokens: the first token of each lease
}

func newBrokenStore(t *testing.T, kind string) *brokenStore {
	var clock func() time.Time
	opts := []leasetest.MemOption{}
	if kind == "no-expiry" {
		start := time.Now()
		clock = func() time.Time { return start } // time never passes: nothing expires
		opts = append(opts, leasetest.WithClock(clock))
	}
	s := &brokenStore{MemStore: leasetest.NewMemStore(opts...), kind: kind, first: map[string]lease.Token{}}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *brokenStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	if s.kind == "owner-not-term" {
		if h, _, ok := s.Holder(c.LeaseID); ok && h.OwnerID == c.OwnerID {
			c.Term = h.Term // the holder's OwnerID is taken for ours
		}
	}
	a, err := s.MemStore.Acquire(ctx, c)
	if err != nil {
		return a, err
	}
	switch s.kind {
	case "two-owners":
		if !a.Acquired {
			return lease.Acquisition{Acquired: true, Lease: lease.Lease{
				ID: c.LeaseID, OwnerID: c.OwnerID, Term: c.Term, Token: 1, TTL: c.TTL, Revision: 1,
			}}, nil
		}
	case "reuse-tokens":
		if a.Acquired {
			if first, ok := s.first[c.LeaseID]; ok {
				a.Lease.Token = first
			} else {
				s.first[c.LeaseID] = a.Lease.Token
			}
		}
	}
	return a, nil
}

func (s *brokenStore) Release(ctx context.Context, l lease.Lease) error {
	if s.kind == "blind-cas" {
		s.Tamper(l.ID, "", 0) // deletes whatever is there
		return nil
	}
	return s.MemStore.Release(ctx, l)
}
