package natsstore

import (
	"sync"
	"time"
)

// maxKeys bounds the key cache. When it is full an arbitrary entry is
// forgotten: the cache holds hints (checked by compare-and-swap) and
// observations, and a forgotten observation only makes a contender wait
// longer.
const maxKeys = 1 << 16

// keyState is what a Store last learned about one key.
type keyState struct {
	rev  uint64    // the key's last revision seen; 0 for an empty subject
	seen time.Time // when rev was first seen, on the monotonic clock
	// free: after rev the lease is free now (a release marker, an expiry
	// marker or an empty subject), so Acquire may write at rev directly.
	free  bool
	owner string // the holder at rev, "" if none or unknown
	term  string // the holder's term at rev
	// ttl is the TTL of the last held value seen under the key, at rev or
	// before; an operator's delete makes contenders wait this long.
	ttl time.Duration
	// token is the fencing token of the value held at rev, and acquired
	// its acquisition time (unix ms), repeated by renewals.
	token    uint64
	acquired int64
	meta     map[string]string
}

// keyCache remembers keyStates. It is safe for concurrent use.
type keyCache struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]keyState
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

// put stores st, keeping the observation time when the revision is
// unchanged, and the TTL of earlier values when st has none.
func (c *keyCache) put(key string, st keyState) keyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[key]
	switch {
	case ok && old.rev == st.rev:
		st.seen = old.seen
	default:
		st.seen = c.now()
	}
	if st.ttl == 0 {
		st.ttl = old.ttl
	}
	if st.acquired == 0 && old.owner == st.owner && old.term == st.term && old.token == st.token {
		st.acquired = old.acquired
	}
	if !ok && len(c.m) >= maxKeys {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = st
	return st
}

// observe records that key was seen at rev and reports whether it has been
// seen unchanged for at least wait, on this process's monotonic clock: the
// test by which a contender judges an expiry the server does not report.
//
// The first sighting counts from when the read that saw it returned, which
// is after the write it saw was made, so the wait never ends before the
// writer's own TTL (measured from before its write) has run out, up to the
// difference in clock rates that the owner's safety margin covers.
func (c *keyCache) observe(key string, st keyState, wait time.Duration) bool {
	st = c.put(key, st)
	return c.now().Sub(st.seen) >= wait
}

// forget drops what is known about key.
func (c *keyCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// len reports the number of keys remembered, for tests.
func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
