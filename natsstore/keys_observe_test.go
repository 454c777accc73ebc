package natsstore

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore/internal/expiry"
)

// heldAt is the keyState of a value held by owner at rev with a TTL of its
// own.
func heldAt(rev uint64, owner string, ttl time.Duration) keyState {
	return keyState{Key: expiry.Key{Rev: rev, State: expiry.Held, TTL: ttl}, keyHolder: keyHolder{owner: owner}}
}

// observe records that key was seen in state st and reports whether it has
// been seen unchanged for at least wait.
func (c *keyCache) observe(key string, st keyState, wait time.Duration) bool {
	st = c.put(key, st)
	return c.now().Sub(st.Seen) >= wait
}

// judgeEmpty judges key's subject found empty.
func judgeEmpty(s *Store, key string) verdict {
	v, err := s.writes.judge(context.Background(), time.Now().Add(time.Second), lease.Claim{LeaseID: key},
		&jetstream.RawStreamMsg{})
	if err != nil {
		panic(err)
	}
	return v
}

// The observation clock of ExpiryObserved mode, in virtual time.
func TestObserveUnchangedRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newKeyCache(time.Now)
		held := heldAt(10, "a", 10*time.Second)
		assert.False(t, c.observe("k", held, held.TTL), "first sighting")
		time.Sleep(9 * time.Second)
		assert.False(t, c.observe("k", held, held.TTL), "9 s unchanged")

		// A renewal (new revision) starts the clock again.
		renewed := held
		renewed.Rev = 11
		assert.False(t, c.observe("k", renewed, held.TTL))
		time.Sleep(9 * time.Second)
		assert.False(t, c.observe("k", renewed, held.TTL), "18 s after the first sighting, 9 s after the renewal")
		time.Sleep(time.Second)
		assert.True(t, c.observe("k", renewed, held.TTL), "10 s unchanged")

		// Other keys are independent.
		assert.False(t, c.observe("other", held, held.TTL))
	})
}

// A failed Acquire interrupts the observation of a held revision: it counts
// anew from the next sighting, by a read or by a watch, because the outage
// that failed the contender may have kept the holder from renewing.
func TestObserveStartsAgainAfterAnInterruption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newKeyCache(time.Now)
		held := heldAt(10, "a", 10*time.Second)
		assert.False(t, c.observe("k", held, held.TTL))
		assert.Equal(t, 10*time.Second, c.expiresIn("k"))
		time.Sleep(4 * time.Second)
		assert.Equal(t, 6*time.Second, c.expiresIn("k"))

		c.interrupt("k") // the store did not answer at 4 s
		assert.Equal(t, 10*time.Second, c.expiresIn("k"), "a whole TTL from the next sighting")
		time.Sleep(8 * time.Second) // an outage until 12 s
		assert.False(t, c.observe("k", held, held.TTL), "12 s unchanged, but seen again only now")
		assert.Equal(t, 10*time.Second, c.expiresIn("k"))
		time.Sleep(9 * time.Second)
		assert.False(t, c.observe("k", held, held.TTL))
		time.Sleep(time.Second)
		assert.True(t, c.observe("k", held, held.TTL), "a TTL after the sighting that followed the outage")

		// A watch that delivers the same revision after an outage counts
		// as a sighting; a stale delivery of an older one does not.
		c.put("w", held)
		time.Sleep(5 * time.Second)
		c.interrupt("w")
		time.Sleep(5 * time.Second)
		c.saw("w", heldAt(9, "a", held.TTL), true)
		assert.Equal(t, 10*time.Second, c.expiresIn("w"), "an older revision is no sighting")
		c.saw("w", held, true)
		time.Sleep(time.Second)
		assert.Equal(t, 9*time.Second, c.expiresIn("w"), "counted from the watch's delivery")
		assert.False(t, c.observe("w", held, held.TTL))

		// A request of the store that went unanswered (or found the stream
		// without a leader) restarts every held value seen before it; one
		// first seen after it counts on.
		c.put("o", held)
		time.Sleep(8 * time.Second)
		c.outage()
		time.Sleep(time.Second)
		c.put("after", held)
		assert.Equal(t, 10*time.Second, c.expiresIn("o"))
		time.Sleep(2 * time.Second)
		assert.False(t, c.observe("o", held, held.TTL), "11 s unchanged, but seen again only now")
		assert.Equal(t, 8*time.Second, c.expiresIn("after"))
		time.Sleep(8 * time.Second)
		assert.True(t, c.observe("after", held, held.TTL))
		assert.False(t, c.observe("o", held, held.TTL))
		time.Sleep(2 * time.Second)
		assert.True(t, c.observe("o", held, held.TTL))

		// Only held values are interrupted: the wait after a key vanished
		// goes on (its holder's TTL runs whether or not the store answers).
		gone := keyState{Key: expiry.Key{Rev: 20, State: expiry.Vanished}}
		c.put("g", gone)
		time.Sleep(5 * time.Second)
		c.interrupt("g")
		assert.True(t, c.observe("g", gone, 5*time.Second))
		assert.Zero(t, c.expiresIn("g"), "not a held value")
	})
}

func TestObserveRemembersTTLAndAcquisition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newKeyCache(time.Now)
		first := heldAt(5, "a", 7*time.Second)
		first.token, first.acquired = 5, 123
		c.put("k", first)
		// A renewal by the same acquisition keeps the acquisition time.
		renewal := heldAt(6, "a", 7*time.Second)
		renewal.token = 5
		c.put("k", renewal)
		st, ok := c.get("k")
		require.True(t, ok)
		assert.Equal(t, int64(123), st.acquired)
		// An operator's delete marker has no TTL; the last held TTL stays.
		c.put("k", keyState{Key: expiry.Key{Rev: 7}})
		st, _ = c.get("k")
		assert.Equal(t, 7*time.Second, st.TTL)
		assert.Zero(t, st.acquired)
		assert.Empty(t, st.owner)
	})
}

func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache(time.Now)
	for i := range maxKeys + 10 {
		c.put(fmt.Sprint(i), keyState{Key: expiry.Key{Rev: uint64(i + 1)}})
	}
	assert.Equal(t, maxKeys, c.len())
}

func TestRoundUpSecond(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Second + 1, 2 * time.Second},
		{30 * time.Second, 30 * time.Second},
		{1<<63 - 1, (1<<63 - 1) / time.Second * time.Second},
	} {
		assert.Equal(t, tc.want, roundUpSecond(tc.in), "%v", tc.in)
	}
	assert.Equal(t, 1001*time.Millisecond, ttlMillis(time.Second+1))
	assert.Equal(t, time.Second, ttlMillis(time.Second))
}

// A watch that lags behind the store's own writes and reads does not move
// the cache back, nor restart the clock of a revision already seen.
func TestSawIgnoresOlderRevisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newKeyCache(time.Now)
		c.saw("k", heldAt(7, "a", time.Second), true)
		time.Sleep(time.Second)
		c.put("k", heldAt(9, "a", 0))
		c.saw("k", heldAt(8, "a", 0), true)
		c.saw("k", heldAt(9, "a", 0), true)
		st, _ := c.get("k")
		assert.Equal(t, uint64(9), st.Rev)
		assert.Equal(t, uint64(9), st.Top)
		time.Sleep(time.Second)
		assert.True(t, c.observe("k", heldAt(9, "a", 0), time.Second), "seen at 9 one second ago")

		// An empty subject keeps the highest revision seen.
		c.put("k", keyState{Key: expiry.Key{State: expiry.Vanished}})
		st, _ = c.get("k")
		assert.Equal(t, uint64(9), st.Top)
		c.saw("k", keyState{Key: expiry.Key{Rev: 9}}, true)
		st, _ = c.get("k")
		assert.Equal(t, expiry.Vanished, st.State, "an old event does not undo a vanished key")
	})
}

// A full cache forgets a free key before one seen held.
func TestKeyCacheForgetsFreeKeysFirst(t *testing.T) {
	c := newKeyCache(time.Now)
	c.put("held", heldAt(1, "o", time.Second))
	for i := range maxKeys - 1 {
		c.put(fmt.Sprint(i), freeState(uint64(i+1)))
	}
	for i := range 100 {
		c.put(fmt.Sprint("new", i), heldAt(1, "o", time.Second))
	}
	assert.Equal(t, maxKeys, c.len())
	_, ok := c.get("held")
	assert.True(t, ok)
}

// Events are noted once per revision.
func TestNoteOncePerRevision(t *testing.T) {
	c := newKeyCache(time.Now)
	c.put("k", keyState{Key: expiry.Key{Rev: 3}})
	assert.True(t, c.note("k", 3, notedCorrupt))
	assert.False(t, c.note("k", 3, notedCorrupt))
	assert.True(t, c.note("k", 3, notedVanished))
	assert.False(t, c.note("k", 2, notedVanished|notedCorrupt), "not the current revision")
	c.put("k", keyState{Key: expiry.Key{Rev: 4}})
	assert.True(t, c.note("k", 4, notedCorrupt))
}

// An empty subject, in virtual time: free at once for a key never seen;
// vanished (free after the bucket's maximum TTL) where a value was seen; and
// free again when the sighting is so old that the key's own expiry explains
// the emptiness (server mode only: without per-message TTLs nothing
// expires).
func TestJudgeEmptySubject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Store{
			log:          Config{}.logger(),
			openedBucket: openedBucket{bucket: "b", maxTTL: 2 * time.Minute, markerTTL: time.Minute},
			keyBook:      keyBook{keys: newKeyCache(time.Now)},
			upkeep:       upkeep{pokes: make(chan struct{}, 1)},
		}
		s.writes = writesOf(s)
		s.bucketChecks = checksOf(s)
		s.mode.Store(uint32(ExpiryServer))
		held := heldAt(5, "a", 10*time.Second)

		assert.True(t, judgeEmpty(s, "new").free, "never seen")

		s.keys.put("purged", held)
		time.Sleep(time.Second)
		assert.False(t, judgeEmpty(s, "purged").free, "seen held a second ago")
		time.Sleep(2*time.Minute - time.Second)
		assert.False(t, judgeEmpty(s, "purged").free, "the wait counts from when the emptiness was seen")
		time.Sleep(time.Second)
		assert.True(t, judgeEmpty(s, "purged").free, "the bucket's maximum TTL after")

		// The server keeps a held value for its TTL and a grace of one TTL
		// more (Config.ExpiryGrace), then its expiry marker.
		s.keys.put("old", held)
		s.keys.put("recent", held)
		time.Sleep(10*time.Second + time.Minute + serverExpiryGrace + time.Second)
		assert.False(t, judgeEmpty(s, "recent").free, "the grace has not run out")
		time.Sleep(10 * time.Second)
		assert.True(t, judgeEmpty(s, "old").free, "its own expiry and marker explain it")

		s.mode.Store(uint32(ExpiryObserved))
		s.keys.put("observed", held)
		time.Sleep(time.Hour)
		assert.False(t, judgeEmpty(s, "observed").free, "nothing expires in observed mode")
	})
}

// The assumption expiry by observation rests on: a contender's clock runs
// no faster than the holder's by more than SafetyMargin/TTL. A contender 9%
// fast judges a 10 s lease expired only after the holder's validity (TTL -
// 10% margin = 9 s of the holder's time) has ended; one 12% fast, beyond
// the margin, judges it early, which is what the margin guards against.
func TestObservationWithinTheMarginNeverPrecedesTheValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rated := func(rate float64) func() time.Time {
			return func() time.Time { return start.Add(time.Duration(float64(time.Since(start)) * rate)) }
		}
		within, beyond := newKeyCache(rated(1.09)), newKeyCache(rated(1.12))
		held := heldAt(10, "a", 10*time.Second)
		validity := held.TTL - held.TTL/10 // the holder's, from its write, sent before either saw it
		within.put("k", held)
		beyond.put("k", held)
		time.Sleep(validity)
		assert.False(t, within.observe("k", held, held.TTL), "9% fast: not before the holder's validity ends")
		assert.True(t, beyond.observe("k", held, held.TTL), "12% fast: before it, beyond the margin")
	})
}
