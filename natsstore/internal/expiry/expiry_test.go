package expiry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0    = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	rules = Rules{MaxTTL: 2 * time.Minute, Emptied: func(ttl time.Duration) time.Duration {
		return 2*ttl + time.Minute + 2*time.Second // two TTLs on the server, the marker's minute, a margin
	}}
)

func at(d time.Duration) Clock { return Clock{Now: t0.Add(d)} }

// Every rule of docs/guarantees.md's table of take decisions, for a key
// whose last message is s, given what was known before.
func TestDecide(t *testing.T) {
	held := Key{Rev: 10, State: Held, Seen: t0, TTL: 10 * time.Second}
	for _, tc := range []struct {
		name  string
		k     Key
		known bool
		s     Sighting
		c     Clock
		want  Decision
	}{
		{"a release marker", held, true, Sighting{Rev: 11, State: Free}, at(time.Second),
			Decision{Verdict: Take, Rev: 11}},
		{"an expiry marker, unconfirmed", held, true, Sighting{Rev: 11, State: Marker}, at(time.Second),
			Decision{Verdict: Take, Rev: 11, Confirm: true}},
		{"an expiry marker confirmed before", Key{Rev: 11, State: Free, Seen: t0}, true,
			Sighting{Rev: 11, State: Marker}, at(time.Second), Decision{Verdict: Take, Rev: 11}},
		{"held, first sighting", Key{}, false, Sighting{Rev: 10, State: Held, TTL: 10 * time.Second}, at(0),
			Decision{Verdict: Hold, Until: t0.Add(10 * time.Second)}},
		{"held, unchanged for less than its TTL", held, true, Sighting{Rev: 10, State: Held}, at(9 * time.Second),
			Decision{Verdict: Hold, Until: t0.Add(10 * time.Second)}},
		{"held, unchanged for its TTL", held, true, Sighting{Rev: 10, State: Held}, at(10 * time.Second),
			Decision{Verdict: Take, Rev: 10}},
		{"held, renewed: the count starts again", held, true, Sighting{Rev: 12, State: Held},
			at(10 * time.Second), Decision{Verdict: Hold, Until: t0.Add(20 * time.Second)}},
		{"held, interrupted: the count starts again", Key{Rev: 10, State: Held, Seen: t0, TTL: 10 * time.Second,
			Interrupted: true}, true, Sighting{Rev: 10, State: Held}, at(10 * time.Second),
			Decision{Verdict: Hold, Until: t0.Add(20 * time.Second)}},
		{"held, seen before an outage", held, true, Sighting{Rev: 10, State: Held},
			Clock{Now: t0.Add(10 * time.Second), Down: t0.Add(time.Second)},
			Decision{Verdict: Hold, Until: t0.Add(20 * time.Second)}},
		{"held by the contender's own term", Key{}, false, Sighting{Rev: 10, State: Held, Own: true}, at(0),
			Decision{Verdict: Take, Rev: 10}},
		{"held under a session: ask the session", Key{}, false, Sighting{Rev: 10, State: Bound}, at(time.Hour),
			Decision{Verdict: AskSession}},
		{"not a lease: never free", held, true, Sighting{Rev: 11, State: Unknown}, at(time.Hour),
			Decision{Verdict: Hold}},
		{"deleted by hand: wait the bucket's MaxTTL", held, true, Sighting{Rev: 11, State: Vanished},
			at(time.Second), Decision{Verdict: Hold, Until: t0.Add(time.Second + rules.MaxTTL), Vanished: true}},
		{"deleted by hand, MaxTTL ago", Key{Rev: 11, State: Vanished, Seen: t0}, true,
			Sighting{Rev: 11, State: Vanished}, at(rules.MaxTTL), Decision{Verdict: Take, Rev: 11}},
		{"empty, never seen", Key{}, false, Sighting{}, at(0), Decision{Verdict: Take}},
		{"empty, seen free", Key{Rev: 11, State: Free, Seen: t0}, true, Sighting{}, at(0), Decision{Verdict: Take}},
		{"empty, seen held: vanished", held, true, Sighting{}, at(time.Second),
			Decision{Verdict: Hold, Until: t0.Add(time.Second + rules.MaxTTL), Vanished: true}},
		{"empty, seen held so long ago that its expiry explains it", held, true, Sighting{},
			at(rules.Emptied(held.TTL) + time.Millisecond), Decision{Verdict: Take}},
		{"empty, seen held under a session long ago: vanished", Key{Rev: 10, State: Bound, Seen: t0}, true,
			Sighting{}, at(time.Hour), Decision{Verdict: Hold, Until: t0.Add(time.Hour + rules.MaxTTL),
				Vanished: true}},
		{"empty, without server expiry: vanished", held, true, Sighting{}, at(time.Hour),
			Decision{Verdict: Hold, Until: t0.Add(time.Hour + rules.MaxTTL), Vanished: true}},
		{"empty, never seen, but known to have existed", Key{}, false, Sighting{Existed: true}, at(0),
			Decision{Verdict: Hold, Until: t0.Add(rules.MaxTTL), Vanished: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rules
			if tc.name == "empty, without server expiry: vanished" {
				r.Emptied = func(time.Duration) time.Duration { return 0 }
			}
			_, got := Decide(tc.k, tc.known, tc.s, r, tc.c)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The session rules: what a session key's last message says of the
// session of a lease written at revision 10 under it, and the write that
// proves it.
func TestSession(t *testing.T) {
	take := Decision{Verdict: Take}
	for _, tc := range []struct {
		name            string
		s               Sighting
		sameTerm        bool
		d               Decision // the decision on the session's key, when asked
		ended, ask      bool
		proof           *Proof
		endedWithProofs bool
	}{
		{"empty: judged as a key that existed", Sighting{Existed: true}, false, take, false, true,
			&Proof{Session: "s", Rev: 0}, true},
		{"not a lease: held", Sighting{Rev: 12, State: Unknown}, false, take, false, false, nil, false},
		{"another term after the lease: ended for good", Sighting{Rev: 12, State: Held}, false, take,
			true, false, nil, false},
		{"another term before the lease: an old answer", Sighting{Rev: 8, State: Held}, false, take,
			false, false, nil, false},
		{"its own term under a session: not a session", Sighting{Rev: 12, State: Bound}, true, take,
			false, false, nil, false},
		{"its own term, unchanged for its TTL: proved", Sighting{Rev: 9, State: Held}, true, take,
			false, true, &Proof{Session: "s", Rev: 9}, true},
		{"its own term, still counting", Sighting{Rev: 9, State: Held}, true, Decision{Verdict: Hold},
			false, true, nil, false},
		{"a release after the lease: no proof", Sighting{Rev: 12, State: Free}, false, take,
			false, true, nil, true},
		{"a release before the lease: proved", Sighting{Rev: 8, State: Free}, false, take,
			false, true, &Proof{Session: "s", Rev: 8}, true},
		{"deleted by hand, MaxTTL ago: proved", Sighting{Rev: 12, State: Vanished}, false, take,
			false, true, &Proof{Session: "s", Rev: 12}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ended, ask := Session(10, tc.s, tc.sameTerm)
			assert.Equal(t, tc.ended, ended, "ended")
			assert.Equal(t, tc.ask, ask, "ask")
			if !ask {
				return
			}
			ended, proof := Ended(10, "s", tc.s, tc.d)
			assert.Equal(t, tc.endedWithProofs, ended)
			assert.Equal(t, tc.proof, proof)
		})
	}
}

// A key's count: renewals, outages and old sightings.
func TestSeeKeepsTheCount(t *testing.T) {
	k := See(Key{}, false, Key{Rev: 5, State: Held, TTL: time.Second}, at(0))
	assert.Equal(t, t0, k.Seen)
	k = See(k, true, Key{Rev: 5, State: Held}, at(time.Second))
	assert.Equal(t, t0, k.Seen, "the same revision: the count goes on")
	assert.Equal(t, time.Second, k.TTL, "the TTL of the last held value")
	k = See(k, true, Key{Rev: 3, State: Held}, at(2*time.Second))
	assert.Equal(t, uint64(5), k.Top)
	assert.Equal(t, t0.Add(2*time.Second), k.Seen)
	until, ok := k.HeldUntil(at(2 * time.Second))
	assert.True(t, ok)
	assert.Equal(t, t0.Add(3*time.Second), until)
	_, ok = Key{State: Bound}.HeldUntil(at(0))
	assert.False(t, ok, "a value under a session never expires by itself")
	until, ok = Key{State: Vanished, Seen: t0}.VanishedUntil(rules)
	assert.True(t, ok)
	assert.Equal(t, t0.Add(rules.MaxTTL), until)
}

// modelTTL is the TTL of the model's leases.
const modelTTL = 10 * time.Second

// TestTakeModel checks the decision against a model of the server: one
// stream of revisions shared by a lock key and its session's key, a holder
// that takes the session and a lock under it (or a lock with a lease of its
// own), renews, releases or stops, and a contender whose every answer for
// either key may be the server's or any earlier one (late, or from a
// deposed stream leader). The contender takes with the compare-and-swaps
// the decision names; the server accepts each only at the key's current
// revision.
//
// Invariant: a take that lands displaces a holder whose validity (its last
// write's send time plus the TTL) has ended, or who released.
func TestTakeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{bound: rapid.Bool().Draw(rt, "bound"), cache: map[string]known{}}
		m.start()
		for range rapid.IntRange(10, 80).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 19).Draw(rt, "op"); {
			case op < 6:
				m.now += rapid.SampledFrom(steps).Draw(rt, "advance")
			case op < 12:
				m.renew()
			case op < 13:
				m.down = m.now
			case op < 14: // rare: it ends the run's interest
				m.release()
			default:
				if m.take(rt) {
					return
				}
			}
		}
	})
}

// steps are the model's advances of time: around the TTL, where the rule
// bites (rapid draws small numbers most).
var steps = []time.Duration{0, time.Millisecond, time.Second, 3 * time.Second, modelTTL - time.Millisecond,
	modelTTL, modelTTL + time.Second}

type version struct {
	rev   uint64
	state State
	ttl   time.Duration
}

type known struct {
	k  Key
	ok bool
}

type model struct {
	bound     bool // the lock is held under a session
	now, down time.Duration
	seq       uint64
	hist      map[string][]version // every version of each key, oldest first
	sent      time.Duration        // the holder's last write's send time
	released  bool
	lockRev   uint64
	cache     map[string]known
}

// The key whose writes are the holder's renewals.
func (m *model) renewed() string {
	if m.bound {
		return "session"
	}
	return "lock"
}

func (m *model) write(key string, v version) {
	m.seq++
	v.rev = m.seq
	m.hist[key] = append(m.hist[key], v)
}

func (m *model) current(key string) version {
	h := m.hist[key]
	if len(h) == 0 {
		return version{}
	}
	return h[len(h)-1]
}

func (m *model) start() {
	m.hist = map[string][]version{}
	m.sent = m.now
	if m.bound {
		m.write("session", version{state: Held, ttl: modelTTL})
		m.write("lock", version{state: Bound})
	} else {
		m.write("lock", version{state: Held, ttl: modelTTL})
	}
	m.lockRev = m.current("lock").rev
}

func (m *model) renew() {
	if m.released {
		return
	}
	m.sent = m.now
	m.write(m.renewed(), version{state: Held, ttl: modelTTL})
	if !m.bound {
		m.lockRev = m.current("lock").rev
	}
}

func (m *model) release() {
	if m.released {
		return
	}
	m.released = true
	m.write(m.renewed(), version{state: Free})
}

// answer is what the contender reads of key: the current version or any
// earlier one (an empty subject before the first).
func (m *model) answer(rt *rapid.T, key string) version {
	h := m.hist[key]
	if len(h) == 0 || !rapid.Bool().Draw(rt, "old "+key) {
		return m.current(key)
	}
	return h[rapid.IntRange(0, len(h)-1).Draw(rt, "answer "+key)]
}

func (m *model) decide(key string, v version, existed bool) Decision {
	c := m.cache[key]
	s := Sighting{Rev: v.rev, State: v.state, TTL: v.ttl, Existed: existed}
	next, d := Decide(c.k, c.ok, s, Rules{MaxTTL: 2 * modelTTL}, Clock{Now: t0.Add(m.now), Down: t0.Add(m.down)})
	m.cache[key] = known{next, true}
	return d
}

// take tries a take and reports whether one landed (which ends a run).
func (m *model) take(rt *rapid.T) bool {
	return m.takeWith(rt, func(key string) version { return m.answer(rt, key) })
}

func (m *model) takeWith(rt interface{ Fatalf(string, ...any) }, answer func(key string) version) bool {
	lock := answer("lock")
	d := m.decide("lock", lock, false)
	var proof *Proof
	if d.Verdict == AskSession {
		sess := answer("session")
		ended, ask := Session(lock.rev, Sighting{Rev: sess.rev, State: sess.state}, true)
		if ask {
			sd := m.decide("session", sess, true)
			ended, proof = Ended(lock.rev, "session", Sighting{Rev: sess.rev, State: sess.state}, sd)
		}
		if !ended {
			return false
		}
		d = Decision{Verdict: Take, Rev: lock.rev}
	}
	if d.Verdict != Take {
		return false
	}
	if proof != nil {
		if m.current(proof.Session).rev != proof.Rev {
			c := m.cache[proof.Session] // refused: an old answer; its count starts again
			c.k.Seen = t0.Add(m.now)
			m.cache[proof.Session] = c
			return false
		}
		m.write(proof.Session, version{state: Free})
	}
	if m.current("lock").rev != d.Rev {
		return false
	}
	if !m.released && m.now < m.sent+modelTTL {
		rt.Fatalf("taken at %v while the holder is valid until %v (lock %+v)", m.now, m.sent+modelTTL, lock)
	}
	return true
}

// The case the model exists for: a session key read once, its session
// renewed since, and the old answer given again a TTL after the first.
func TestOldSessionAnswerTakesNothing(t *testing.T) {
	m := &model{bound: true, cache: map[string]known{}}
	m.start()
	first := func(key string) version { return m.hist[key][0] }
	assert.False(t, m.takeWith(t, first))
	m.now = time.Second
	m.renew()
	m.now = modelTTL
	assert.False(t, m.takeWith(t, first), "the proof over the session's key is refused")
	m.now = time.Second + modelTTL
	assert.False(t, m.takeWith(t, m.current), "the renewal's first sighting")
	m.now += modelTTL
	assert.True(t, m.takeWith(t, m.current), "the session's renewal unchanged for its TTL")
}
