package natsstore

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/natsstore/internal/expiry"
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

// keyState is what a Store last learned about one key: what the take
// decision rests on (expiry.Key), the holder at its revision, and the
// events reported for it.
type keyState struct {
	expiry.Key
	keyHolder
	noted notes // the events already reported for Rev
}

// keyHolder is the holder of a key's value at a revision, as its record
// names it; zero when the key is not held.
type keyHolder struct {
	owner, term string
	// token is the fencing token of the value, and acquired its
	// acquisition time (unix ms), repeated by renewals.
	token    uint64
	acquired int64
	meta     map[string]string
}

// freeState is the keyState of a key free at rev.
func freeState(rev uint64) keyState {
	return keyState{Key: expiry.Key{Rev: rev, State: expiry.Free}}
}

// free reports whether Acquire may write at the key's revision directly.
func (st keyState) free() bool { return st.State == expiry.Free }

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
	st.Key = expiry.See(old.Key, ok, st.Key, c.clockLocked())
	if ok && old.Rev == st.Rev {
		st.noted = old.noted
	}
	if st.acquired == 0 && old.owner == st.owner && old.term == st.term && old.token == st.token {
		st.acquired = old.acquired
	}
	c.storeLocked(key, st, ok)
	return st
}

func (c *keyCache) storeLocked(key string, st keyState, known bool) {
	if !known && len(c.m) >= maxKeys {
		c.evictLocked()
	}
	c.m[key] = st
}

// clockLocked is the clock of a decision made now.
func (c *keyCache) clockLocked() expiry.Clock { return expiry.Clock{Now: c.now(), Down: c.down} }

// decide judges s, the last message of key, with the holder h it names (by
// expiry.Decide) and records what it learned, except a marker's Free state,
// which judge records once the marker is confirmed. It returns what was
// known before.
func (c *keyCache) decide(key string, s expiry.Sighting, h keyHolder, r expiry.Rules) (prev keyState, known bool,
	d expiry.Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, known = c.m[key]
	next, d := expiry.Decide(prev.Key, known, s, r, c.clockLocked())
	if d.Confirm {
		return prev, known, d
	}
	st := keyState{Key: next, keyHolder: h}
	if known && prev.Rev == next.Rev {
		st.noted = prev.noted
	}
	if st.acquired == 0 && prev.owner == h.owner && prev.term == h.term && prev.token == h.token {
		st.acquired = prev.acquired
	}
	c.storeLocked(key, st, known)
	return prev, known, d
}

// evictLocked forgets one entry, preferring one that no contender waits on.
func (c *keyCache) evictLocked() {
	victim, n := "", 0
	for k, st := range c.m {
		if victim == "" || st.free() {
			victim = k
		}
		if n++; st.free() || n >= evictScan {
			break
		}
	}
	delete(c.m, victim)
}

// saw records st, delivered by a watch, unless the cache already knows the
// key at st's revision or later (a watch can lag behind the store's own
// writes and reads). Unless top, it leaves the key's top as it was: see
// writes.watched.
func (c *keyCache) saw(key string, st keyState, top bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[key]
	if ok && st.Rev == old.Rev && old.Recount(c.clockLocked()) {
		old.Seen, old.Interrupted = c.now(), false // a watch re-created after an outage
		c.m[key] = old
		return
	}
	if ok && st.Rev <= max(old.Rev, old.Top) {
		return
	}
	st = c.putLocked(key, st)
	if !top {
		st.Top = old.Top
		c.m[key] = st
	}
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
	if st, ok := c.m[key]; ok && st.State == expiry.Held {
		st.Interrupted = true
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
		st.Seen = c.now()
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

// expiresIn returns how long key's current value, held with a TTL of its
// own, has left before this store judges it expired if it stays unchanged
// (expiry.Key.HeldUntil), at least 1 ms, or 0 when that is unknown or not
// how it ends.
func (c *keyCache) expiresIn(key string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	clock := c.clockLocked()
	if until, ok := c.m[key].HeldUntil(clock); ok {
		return max(until.Sub(clock.Now), time.Millisecond)
	}
	return 0
}

// vanishedLeft returns how long this store still lets nobody take key,
// which vanished without a release (expiry.Key.VanishedUntil), at least
// 1 ms; 0 when key is not known to have vanished.
func (c *keyCache) vanishedLeft(key string, r expiry.Rules) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.m[key].VanishedUntil(r); ok {
		return max(until.Sub(c.now()), time.Millisecond)
	}
	return 0
}

// note records that the events n were reported for key at rev, and reports
// whether any of them was not yet.
func (c *keyCache) note(key string, rev uint64, n notes) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[key]
	if !ok || st.Rev != rev || st.noted&n == n {
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
func (w *writes) watched(e jetstream.KeyValueEntry) {
	rev := e.Revision()
	seen := !w.replicated()
	if seen {
		w.sawRevision(rev)
	}
	st := keyState{Key: expiry.Key{Rev: rev}}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindHeld {
			st = heldState(rev, r)
		}
	case jetstream.KeyValueDelete:
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindReleased {
			st.State = expiry.Free
		}
	case jetstream.KeyValuePurge:
		if m, ok := e.(interface{ expiryMarker() bool }); ok && m.expiryMarker() {
			st.State = expiry.Marker
		}
	}
	// Anything else (a purge, a delete by hand, a value that is not a
	// lease) is recorded as neither free nor held: Acquire reads the key
	// and judges it, with the clock started now.
	w.keys.saw(e.Key(), st, seen)
}
