package leasetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// MemStore is an in-memory lease.Store and lease.Watcher for tests and
// demos. Its revisions behave like a JetStream KV bucket's: one counter for
// the whole store, advanced by every write, delete and expiry, so tokens
// strictly increase.
//
// Expiry is judged by the store's clock (time.Now unless WithClock says
// otherwise); inside a testing/synctest bubble that is virtual time. When
// the clock is time.Now, expiries are also announced to watchers by a timer,
// as a NATS server announces them with a marker.
type MemStore struct {
	now         func() time.Time
	realTimers  bool
	mu          sync.Mutex
	rev         uint64
	keys        map[string]*memEntry
	watchers    map[string]map[*memWatch]struct{}
	closed      bool
	expiryTimer map[string]*time.Timer
}

type memEntry struct {
	holder  lease.Holder // OwnerID "" for a key deleted by hand
	rev     uint64       // revision of the last write
	expires time.Time
	// sessionTerm is the term of the session (holder.Session) a lease
	// acquired under a session is held under; "" for a lease with a TTL.
	sessionTerm string
}

type memWatch struct{ ch chan lease.Event }

var (
	_ lease.Store   = (*MemStore)(nil)
	_ lease.Watcher = (*MemStore)(nil)
	_ lease.Reader  = (*MemStore)(nil)
)

// MemOption configures a MemStore.
type MemOption func(*MemStore)

// WithClock makes the store judge expiry by now instead of time.Now.
// Expiry is then noticed on the next call, not announced by a timer.
func WithClock(now func() time.Time) MemOption {
	return func(s *MemStore) { s.now, s.realTimers = now, false }
}

// NewMemStore returns an empty store.
func NewMemStore(opts ...MemOption) *MemStore {
	s := &MemStore{
		now:         time.Now,
		realTimers:  true,
		keys:        make(map[string]*memEntry),
		watchers:    make(map[string]map[*memWatch]struct{}),
		expiryTimer: make(map[string]*time.Timer),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Acquire implements lease.Store.
func (s *MemStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	if err := lease.ValidateClaim(c); err != nil {
		return lease.Acquisition{}, err
	}
	if err := ctx.Err(); err != nil {
		return lease.Acquisition{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lease.Acquisition{}, lease.ErrClosed
	}
	if e := s.live(c.LeaseID); e != nil && (e.holder.Term != c.Term || e.holder.OwnerID != c.OwnerID) {
		a := lease.Acquisition{Holder: e.holder}
		if e.sessionTerm == "" { // free when its last TTL runs out, unless written again
			a.ExpiresIn = max(e.expires.Sub(s.now()), time.Nanosecond)
		}
		return a, nil
	}
	l := lease.Lease{ID: c.LeaseID, OwnerID: c.OwnerID, Term: c.Term, TTL: c.TTL, Meta: c.Meta}
	rev := s.write(l, 0)
	l.Token, l.Revision = lease.Token(rev), rev
	return lease.Acquisition{Acquired: true, Lease: l}, nil
}

// Renew implements lease.Store.
func (s *MemStore) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	if err := lease.ValidateLease(l); err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return l, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return l, lease.ErrClosed
	}
	if err := s.held(l); err != nil {
		return l, err
	}
	l.Revision = s.write(l, l.Token)
	return l, nil
}

// Release implements lease.Store.
func (s *MemStore) Release(ctx context.Context, l lease.Lease) error {
	if err := lease.ValidateLease(l); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lease.ErrClosed
	}
	if err := s.held(l); err != nil {
		return err
	}
	s.remove(l.ID)
	return nil
}

// Watch implements lease.Watcher.
func (s *MemStore) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, lease.ErrClosed
	}
	// The current state first, as natsstore reports it. It is read before
	// the watch is registered: reading may expire the lease, which notifies
	// the registered watches, and this one's buffer holds one event.
	e := s.live(leaseID)
	w := &memWatch{ch: make(chan lease.Event, 1)}
	if s.watchers[leaseID] == nil {
		s.watchers[leaseID] = make(map[*memWatch]struct{})
	}
	s.watchers[leaseID][w] = struct{}{}
	if e != nil && e.holder.OwnerID != "" {
		w.ch <- lease.Event{LeaseID: leaseID, Kind: lease.EventHeld, Holder: e.holder, Revision: e.rev}
	} else if e == nil {
		w.ch <- lease.Event{LeaseID: leaseID, Kind: lease.EventFree}
	}
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.watchers[leaseID][w]; ok {
			delete(s.watchers[leaseID], w)
			close(w.ch)
		}
	})
	return w.ch, nil
}

// Read implements lease.Reader.
func (s *MemStore) Read(ctx context.Context, leaseID string) (lease.Observation, error) {
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return lease.Observation{}, err
	}
	if err := ctx.Err(); err != nil {
		return lease.Observation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lease.Observation{}, lease.ErrClosed
	}
	o := lease.Observation{LeaseID: leaseID, Seen: s.now()}
	if e := s.live(leaseID); e != nil {
		// A key deleted by hand is not free yet, but nobody holds it.
		o.Held, o.Holder, o.Revision = e.holder.OwnerID != "", e.holder, e.rev
	}
	return o, nil
}

// Close closes every watch and makes later calls return lease.ErrClosed.
// It is idempotent.
func (s *MemStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for id, ws := range s.watchers {
		for w := range ws {
			close(w.ch)
		}
		delete(s.watchers, id)
	}
	for id, t := range s.expiryTimer {
		t.Stop()
		delete(s.expiryTimer, id)
	}
	return nil
}

// Holder returns the current holder of a lease and the revision of its last
// write, for tests. ok is false when the lease is free or expired.
func (s *MemStore) Holder(leaseID string) (h lease.Holder, revision uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live(leaseID); e != nil && e.holder.OwnerID != "" {
		return e.holder, e.rev, true
	}
	return lease.Holder{}, 0, false
}

// Tamper overwrites or (with owner "") deletes a lease key as an operator
// would, for tests. The write gets a new revision like any other; an
// overwrite holds a term of its own, "tampered".
//
// A delete by hand does not free the lease at once: the owner it was taken
// from may act until its own TTL runs out, so contenders see an unknown
// owner ("") until then, as natsstore makes them wait one TTL after a
// delete it cannot explain. The former owner's next renewal reports
// lease.ErrLost. A lease held under a session, which its owner never
// renews, stays taken until the session ends.
func (s *MemStore) Tamper(leaseID, owner string, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner != "" {
		s.write(lease.Lease{ID: leaseID, OwnerID: owner, Term: "tampered", TTL: ttl}, 0)
		return
	}
	e := s.live(leaseID)
	if e == nil || e.holder.OwnerID == "" {
		return
	}
	s.rev++
	rev := s.rev
	// A lease held under a session stays taken while that session lives.
	s.keys[leaseID] = &memEntry{rev: rev, expires: e.expires, holder: lease.Holder{Session: e.holder.Session},
		sessionTerm: e.sessionTerm}
	if s.realTimers {
		if t := s.expiryTimer[leaseID]; t != nil {
			t.Stop()
		}
		s.expiryTimer[leaseID] = time.AfterFunc(e.expires.Sub(s.now()), func() { s.expire(leaseID, rev) })
	}
	s.notify(lease.Event{LeaseID: leaseID, Kind: lease.EventFree, Revision: rev})
}

// live returns the unexpired entry of id, reclaiming an expired one.
// s.mu must be held.
func (s *MemStore) live(id string) *memEntry {
	e := s.keys[id]
	if e == nil {
		return nil
	}
	if !s.now().Before(e.expires) || e.sessionTerm != "" && !s.sessionLive(e) {
		s.remove(id)
		return nil
	}
	return e
}

// held reports whether l is the live lease at its revision. s.mu must be held.
func (s *MemStore) held(l lease.Lease) error {
	e := s.live(l.ID)
	switch {
	case e == nil:
		return fmt.Errorf("%w: %s is free", lease.ErrLost, l.ID)
	case e.holder.OwnerID != l.OwnerID || e.holder.Term != l.Term:
		return fmt.Errorf("%w: %s is held by %s (term %s)", lease.ErrLost, l.ID, e.holder.OwnerID, e.holder.Term)
	case e.rev != l.Revision:
		return fmt.Errorf("%w: %s is at revision %d, not %d", lease.ErrLost, l.ID, e.rev, l.Revision)
	}
	return nil
}

// write stores l as the key's new value and returns its revision; token 0
// means that this write acquires (its revision is the token). s.mu must be
// held.
func (s *MemStore) write(l lease.Lease, token lease.Token) uint64 {
	s.rev++
	rev := s.rev
	if token == 0 {
		token = lease.Token(rev)
	}
	id, ttl := l.ID, l.TTL
	h := lease.Holder{OwnerID: l.OwnerID, Term: l.Term, Token: token, TTL: ttl, Meta: l.Meta}
	s.keys[id] = &memEntry{holder: h, rev: rev, expires: lease.Config{TTL: ttl}.ExpiresAt(s.now())}
	if s.realTimers {
		if t := s.expiryTimer[id]; t != nil {
			t.Stop()
		}
		s.expiryTimer[id] = time.AfterFunc(ttl, func() { s.expire(id, rev) })
	}
	s.notify(lease.Event{LeaseID: id, Kind: lease.EventHeld, Holder: h, Revision: rev})
	return rev
}

// expire reclaims id if it still holds the write at rev.
func (s *MemStore) expire(id string, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.keys[id]; e != nil && e.rev == rev && !s.closed {
		s.live(id)
	}
}

// remove deletes id, as a delete or an expiry marker would, with a new
// revision. s.mu must be held.
func (s *MemStore) remove(id string) {
	if _, ok := s.keys[id]; !ok {
		return
	}
	delete(s.keys, id)
	if t := s.expiryTimer[id]; t != nil {
		t.Stop()
		delete(s.expiryTimer, id)
	}
	s.rev++
	s.notify(lease.Event{LeaseID: id, Kind: lease.EventFree, Revision: s.rev})
}

// notify hands ev to every watcher of its lease, replacing an unread event.
// s.mu must be held; it is the only sender.
func (s *MemStore) notify(ev lease.Event) {
	for w := range s.watchers[ev.LeaseID] {
		select {
		case w.ch <- ev:
		default:
			select {
			case <-w.ch:
			default:
			}
			w.ch <- ev
		}
	}
}
