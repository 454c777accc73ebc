package natsstore

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxKeys bounds the key cache. When it is full, an entry that holds no
// observation a contender waits on is forgotten first (a free key, or a key
// this store holds itself); the cache holds hints, checked by
// compare-and-swap, and observations, whose loss makes a contender wait
// longer, except for one: a store that forgot it saw a key held cannot tell
// a later stream purge of that key from a key never used.
const maxKeys = 1 << 16

// evictScan bounds the entries put looks at to find one to forget.
const evictScan = 64

// keyState is what a Store last learned about one key.
type keyState struct {
	rev  uint64    // the key's last revision seen; 0 for an empty subject
	seen time.Time // when rev (or the empty subject) was first seen, on the monotonic clock
	// free: after rev the lease is free now (a release marker, a confirmed
	// expiry marker, or an empty subject that is explained), so Acquire may
	// write at rev directly.
	free bool
	// expired: rev is an expiry marker of the server that a watch
	// delivered, not yet trusted: Acquire may write at rev once
	// Store.confirmExpiry passes, as judge does for one it read.
	expired bool
	// gone: the key vanished without a release at rev (a delete or purge
	// marker no owner wrote, or, with rev 0, an empty subject where a value
	// was seen). It is free once the bucket's maximum lease TTL has passed
	// since seen.
	gone  bool
	owner string // the holder at rev, "" if none or unknown
	term  string // the holder's term at rev
	// ttl is the TTL of the last held value seen under the key, at rev or
	// before.
	ttl time.Duration
	// token is the fencing token of the value held at rev, and acquired
	// its acquisition time (unix ms), repeated by renewals.
	token    uint64
	acquired int64
	meta     map[string]string
	// bound: the value at rev is held under a session (a version 3
	// record): it never expires by itself.
	bound bool
	// interrupted: an Acquire of the key failed since rev was first seen.
	// The store may have failed every writer meanwhile, the holder's
	// renewals too, so the observation of rev starts again at the next
	// sighting (interrupt).
	interrupted bool
	// top is the highest revision ever seen under the key: a later,
	// non-empty revision below it means the server lost writes.
	top uint64
	// noted holds the events already reported for rev.
	noted notes
}

// notes are events reported once per revision of a key.
type notes uint8

const (
	notedCorrupt notes = 1 << iota
	notedVanished
)

// keyCache remembers keyStates. It is safe for concurrent use.
type keyCache struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]keyState
	// down is when a request of the store last went unanswered, or found
	// the stream without a leader (outage): held values seen before then
	// are observed anew from their next sighting, as after interrupt.
	down time.Time
}

func newKeyCache(now func() time.Time) *keyCache {
	return &keyCache{now: now, m: make(map[string]keyState)}
}

func (c *keyCache) get(key string) (keyState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[key]
	return st, ok
}

// put stores st, keeping the observation time and the events reported when
// the revision and its nature are unchanged, the TTL of earlier values when
// st has none, and the highest revision seen.
func (c *keyCache) put(key string, st keyState) keyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.putLocked(key, st)
}

func (c *keyCache) putLocked(key string, st keyState) keyState {
	old, ok := c.m[key]
	switch {
	case ok && old.rev == st.rev && !c.recountLocked(old):
		// The same revision (or a subject still empty): the clock goes on.
		st.seen = old.seen
		st.noted = old.noted
	case ok && old.rev == st.rev:
		st.seen = c.now() // seen again after an interruption: count anew
		st.noted = old.noted
	default:
		st.seen = c.now()
	}
	if st.ttl == 0 {
		st.ttl = old.ttl
	}
	if st.acquired == 0 && old.owner == st.owner && old.term == st.term && old.token == st.token {
		st.acquired = old.acquired
	}
	st.top = max(st.rev, old.top)
	if !ok && len(c.m) >= maxKeys {
		c.evictLocked()
	}
	c.m[key] = st
	return st
}

// evictLocked forgets one entry, preferring one that no contender waits on.
func (c *keyCache) evictLocked() {
	victim, n := "", 0
	for k, st := range c.m {
		if victim == "" || st.free {
			victim = k
		}
		if n++; st.free || n >= evictScan {
			break
		}
	}
	delete(c.m, victim)
}

// saw records st, delivered by a watch, unless the cache already knows the
// key at st's revision or later (a watch can lag behind the store's own
// writes and reads). Unless top, it leaves the key's top as it was: see
// Store.watched.
func (c *keyCache) saw(key string, st keyState, top bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[key]
	if ok && st.rev == old.rev && c.recountLocked(old) {
		old.seen, old.interrupted = c.now(), false // a watch re-created after an outage
		c.m[key] = old
		return
	}
	if ok && st.rev <= max(old.rev, old.top) {
		return
	}
	st = c.putLocked(key, st)
	if !top {
		st.top = old.top
		c.m[key] = st
	}
}

// observe records that key was seen in state st and reports whether it has
// been seen unchanged for at least wait, on this process's monotonic clock:
// the test by which a contender judges an expiry the server does not report,
// and the end of the wait after a key vanished.
//
// The first sighting counts from when the read or the watch event that saw
// it arrived, which is after the write it saw was made, so the wait never
// ends before the writer's own TTL (measured from before its write) has run
// out, up to the difference in clock rates that the owner's safety margin
// covers.
func (c *keyCache) observe(key string, st keyState, wait time.Duration) bool {
	st = c.put(key, st)
	return c.now().Sub(st.seen) >= wait
}

// interrupt records that an Acquire of key failed (the store did not
// answer, or refused every write): the observation of the key's current
// revision starts again at its next sighting. Whatever kept this store from
// writing may have kept the holder from renewing, and the holder renews as
// soon as the store answers again (a lapsed term resumes): counting the
// outage towards its expiry would hand the lease over after any outage
// that outlasts its TTL since the last renewal. A restart only makes a
// contender wait longer, never less: safety does not depend on it.
func (c *keyCache) interrupt(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[key]; ok && st.owner != "" && !st.bound {
		st.interrupted = true
		c.m[key] = st
	}
}

// restart starts the observation of key's current revision again from
// now: a write at that revision was refused, so an answer that shows it
// again is old.
func (c *keyCache) restart(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[key]; ok {
		st.seen = c.now()
		c.m[key] = st
	}
}

// outage records that a request of the store went unanswered, or found the
// bucket's stream without a leader, now: whatever kept it from the stream
// may keep every holder from renewing, so the observation of every held
// value seen before starts again at its next sighting. (An Acquire that is
// waiting for an answer when the stream comes back would otherwise judge
// the revision it then reads by a count that ran through the outage, and
// take the lease before its holder's renewal lands.)
func (c *keyCache) outage() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = now
}

// recountLocked reports whether the observation of st, a key's state, must
// start again at its next sighting.
func (c *keyCache) recountLocked(st keyState) bool {
	return st.owner != "" && !st.bound && (st.interrupted || st.seen.Before(c.down))
}

// expiresIn returns how long key's current value, held with a TTL of its
// own, has left before this store judges it expired if it stays unchanged
// (its TTL from its first sighting, or the whole TTL when its observation
// starts again), or 0 when that is unknown or not how it ends.
func (c *keyCache) expiresIn(key string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[key]
	switch {
	case !ok || st.owner == "" || st.bound || st.ttl <= 0:
		return 0
	case c.recountLocked(st):
		return st.ttl
	}
	return max(st.ttl-c.now().Sub(st.seen), time.Millisecond)
}

// vanishedLeft returns how long this store still lets nobody take key,
// which vanished without a release: wait (the bucket's MaxTTL) from when it
// saw the key vanish, at least 1 ms; 0 when key is not known to have
// vanished.
func (c *keyCache) vanishedLeft(key string, wait time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[key]
	if !ok || !st.gone {
		return 0
	}
	return max(wait-c.now().Sub(st.seen), time.Millisecond)
}

// note records that the events n were reported for key at rev, and reports
// whether any of them was not yet.
func (c *keyCache) note(key string, rev uint64, n notes) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[key]
	if !ok || st.rev != rev || st.noted&n == n {
		return false
	}
	st.noted |= n
	c.m[key] = st
	return true
}

// len reports the number of keys remembered, for tests.
func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// watched records what a watch delivered, before the event reaches the
// watcher: the observation clock of a revision starts when the watch
// delivers it, not at the next poll (a standby that times its next attempt
// from the event then takes an abandoned lease one TTL after its last
// renewal), and a standby that saw a value knows, when the subject is later
// found empty, that it was not a key never used.
//
// For a replicated bucket, what a watch delivers does not count as seen
// for the regression checks (sawRevision, keyState.top): the watch's
// consumer may run on a follower of the stream, which can apply a write
// before the leader does, and a read through the leader a moment later
// then shows the key at an older revision (a clean-clone test run saw a
// store stop so, on a healthy cluster). The checks compare the leader's
// answers with one another. A bucket of one replica has no follower.
func (s *Store) watched(e jetstream.KeyValueEntry) {
	rev := e.Revision()
	seen := !s.replicated()
	if seen {
		s.sawRevision(rev)
	}
	st := keyState{rev: rev}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindHeld {
			st = heldState(rev, r)
		}
	case jetstream.KeyValueDelete:
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindReleased {
			st.free = true
		}
	case jetstream.KeyValuePurge:
		if m, ok := e.(interface{ expiryMarker() bool }); ok && m.expiryMarker() {
			st.expired = true
		}
	}
	// Anything else (a purge, a delete by hand, a value that is not a
	// lease) is recorded as neither free nor held: Acquire reads the key
	// and judges it, with the clock started now.
	s.keys.saw(e.Key(), st, seen)
}
