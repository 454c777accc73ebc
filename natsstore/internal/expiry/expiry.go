// Package expiry decides when a contender may take a lease's key. It is
// the one place that rule lives: natsstore reads the key (and the key of a
// session that holds it), hands each answer to Decide, and then writes the
// compare-and-swaps the Decision names, and nothing else.
//
// The package does no I/O, starts no goroutines and reads no clock: the
// time of each decision is passed in (Clock). docs/guarantees.md, "Every
// take is proved by a write", states the rule and lists each decision.
package expiry

import "time"

// State is what a key's last message says to a contender.
type State uint8

const (
	// Unknown is a message no contender may act on without reading the
	// key: a value that is not a lease, or what a watch delivered that is
	// neither held nor free. The zero value, never free.
	Unknown State = iota
	// Free: a release marker, a confirmed expiry marker, or an empty
	// subject that the key's own history explains. A contender writes at
	// its revision.
	Free
	// Marker is an expiry marker of the server, not yet confirmed: it is
	// free once the bucket is the one the store opened, without a MaxAge
	// (a MaxAge writes the same marker over a held value).
	Marker
	// Vanished: deleted or purged by someone other than its holder (Rev 0:
	// a subject found empty where a value was seen). Its holder may still
	// act: free once the bucket's maximum lease TTL has passed.
	Vanished
	// Held with a TTL of its own: free once seen unchanged for that TTL.
	Held
	// Bound is held under a session: it never expires by itself, and is
	// free once the session has ended (Session).
	Bound
)

var stateNames = [...]string{"unknown", "free", "expiry marker", "vanished", "held", "held under a session"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + string(rune('0'+s)) + ")"
}

// Key is what a contender knows of one key.
type Key struct {
	Rev   uint64    // the key's last revision seen; 0 for an empty subject
	State State     // what the message at Rev is
	Seen  time.Time // when Rev was first seen, on the monotonic clock
	// TTL is the TTL of the last held value seen under the key, at Rev or
	// before.
	TTL time.Duration
	// Interrupted: an Acquire of the key failed since Rev was first seen.
	// Whatever failed it may have kept the holder from renewing, so a Held
	// key's count starts again at its next sighting.
	Interrupted bool
	// Top is the highest revision ever seen under the key.
	Top uint64
}

// Clock is the time of a decision, and when the store last went without
// an answer from the bucket's stream (an outage): a held value seen before
// then is counted again from its next sighting, since the outage may have
// held its renewals up.
type Clock struct {
	Now  time.Time
	Down time.Time
}

// Recount reports whether k's count starts again at its next sighting.
func (k Key) Recount(c Clock) bool {
	return k.State == Held && (k.Interrupted || k.Seen.Before(c.Down))
}

// See returns what is known of a key after a sighting s, given k, what was
// known before (known false: nothing). The count goes on while the
// revision stays the same, unless Recount; it starts now otherwise. s's TTL
// defaults to the last one known. The first sighting counts from when the
// read or watch event that showed it arrived, which is after the write was
// made: the wait never ends before the writer's own TTL, measured from
// before its write, has run out (up to the clock-rate difference that the
// holder's safety margin covers).
func See(k Key, known bool, s Key, c Clock) Key {
	s.Seen = c.Now
	if known && k.Rev == s.Rev && !k.Recount(c) {
		s.Seen = k.Seen
	}
	if s.TTL == 0 {
		s.TTL = k.TTL
	}
	s.Top = max(s.Rev, k.Top)
	return s
}

// Rules are the facts of the bucket a decision rests on.
type Rules struct {
	// MaxTTL is the bucket's maximum lease TTL: how long a key that
	// vanished stays taken.
	MaxTTL time.Duration
	// Emptied returns how long after a value with TTL ttl was seen the
	// server would have emptied its subject by itself (its value's TTL and
	// its expiry marker's both run out), or 0 when the server expires
	// nothing.
	Emptied func(ttl time.Duration) time.Duration
}

// Verdict is what a contender may do.
type Verdict uint8

const (
	// Hold: the key is held, or its state does not let anyone take it.
	// Decision.Until, when set, is when it is free if it stays unchanged.
	Hold Verdict = iota
	// Take: free. The contender writes at Decision.Rev with a
	// compare-and-swap, after the write of Decision.Proof if there is one.
	Take
	// AskSession: held under a session, free only once the session has
	// ended. Read the session's key and decide with Session.
	AskSession
)

// Decision is the answer for one key.
type Decision struct {
	Verdict Verdict
	Rev     uint64    // Take: the revision to write at
	Until   time.Time // Hold: when the key is free if nothing changes; zero if never by itself
	// Confirm: Take only once the bucket is confirmed unchanged, without
	// a MaxAge (an expiry marker); then the key is Free at Rev.
	Confirm bool
	// Vanished: the key vanished without a release (report it).
	Vanished bool
}

// Proof is a compare-and-swap over a session's key at Rev (0: the subject
// is empty) that ends the session's term for good: the term writes its key
// only at the revision it wrote last, so its next renewal is refused.
type Proof struct {
	Session string
	Rev     uint64
}

// Sighting is the last message of a key, as a contender read it.
type Sighting struct {
	Rev   uint64 // 0: the subject is empty
	State State  // Unknown for a message that is not a lease
	TTL   time.Duration
	// Own: the value was written by the contender's own term (a write of
	// ours that landed without our learning it).
	Own bool
	// Existed: the key is known to have held a value, although this
	// store may never have seen it (a session that leases name).
	Existed bool
}

// Decide returns what a contender may do with a key whose last message is
// s, given k, what it knew before (known false: nothing), and what to know
// of the key from now on.
func Decide(k Key, known bool, s Sighting, r Rules, c Clock) (Key, Decision) {
	if s.Rev == 0 {
		return empty(k, known, s, r, c)
	}
	next := See(k, known, Key{Rev: s.Rev, State: s.State, TTL: s.TTL}, c)
	switch s.State {
	case Free:
		return next, Decision{Verdict: Take, Rev: s.Rev}
	case Marker:
		// Trusted without a check when it was confirmed before.
		confirmed := known && k.Rev == s.Rev && k.State == Free
		next.State = Free
		return next, Decision{Verdict: Take, Rev: s.Rev, Confirm: !confirmed}
	case Held, Bound:
		if s.Own {
			return next, Decision{Verdict: Take, Rev: s.Rev}
		}
		if s.State == Bound {
			return next, Decision{Verdict: AskSession}
		}
		return next, counted(next, next.TTL, c)
	case Vanished:
		d := counted(next, r.MaxTTL, c)
		d.Vanished = d.Verdict == Hold
		return next, d
	default:
		return next, Decision{Verdict: Hold}
	}
}

// counted is the decision on a key seen unchanged since k.Seen, free after
// wait.
func counted(k Key, wait time.Duration, c Clock) Decision {
	if c.Now.Sub(k.Seen) >= wait {
		return Decision{Verdict: Take, Rev: k.Rev}
	}
	return Decision{Verdict: Hold, Until: k.Seen.Add(wait)}
}

// empty decides on an empty subject. A subject is empty when the key was
// never used, when the marker of its release or expiry ran out, or when a
// stream purge removed whatever was there, leaving no trace: a held value's
// holder may then act until its TTL runs out. So it is free at once only if
// nothing was known of the key (and nothing says it existed), it was last
// seen free, or it was seen so long ago that the key's own expiry explains
// the emptiness as well as a purge does; otherwise the key vanished, and is
// free once the bucket's maximum lease TTL has passed.
func empty(k Key, known bool, s Sighting, r Rules, c Clock) (Key, Decision) {
	if !known && !s.Existed || known && (k.State == Free || explained(k, r, c)) {
		return See(k, known, Key{State: Free}, c), Decision{Verdict: Take}
	}
	next := See(k, known, Key{State: Vanished}, c)
	d := counted(next, r.MaxTTL, c)
	if d.Verdict == Take && !s.Existed {
		next.State = Free // a session's key stays vanished until its proof lands
	}
	d.Vanished = d.Verdict == Hold && (k.Rev != 0 || s.Existed)
	return next, d
}

// explained reports whether k, a key last seen with a value, has been
// seen so long ago that the server would have emptied its subject by
// itself had nobody written it since. A value under a session never
// expires by itself.
func explained(k Key, r Rules, c Clock) bool {
	if k.State == Vanished || k.State == Bound || k.Rev == 0 || r.Emptied == nil {
		return false
	}
	after := r.Emptied(k.TTL)
	return after > 0 && c.Now.Sub(k.Seen) > after
}

// HeldUntil returns when k, a key held with a TTL of its own, is free if
// it stays unchanged, and false when that is not how it ends.
func (k Key) HeldUntil(c Clock) (time.Time, bool) {
	switch {
	case k.State != Held || k.TTL <= 0:
		return time.Time{}, false
	case k.Recount(c):
		return c.Now.Add(k.TTL), true
	}
	return k.Seen.Add(k.TTL), true
}

// VanishedUntil returns when k, a key that vanished without a release, is
// free, and false when it did not vanish.
func (k Key) VanishedUntil(r Rules) (time.Time, bool) {
	if k.State != Vanished {
		return time.Time{}, false
	}
	return k.Seen.Add(r.MaxTTL), true
}

// Session decides, on the last message s of the key of the session that
// holds a lease written at lockRev, the cases that need no count: ended
// says whether the session has ended; ask says that its key must be judged
// as a lease's first (Decide with Existed, then Ended). sameTerm: s is a
// value of the session's own term.
//
// The session's term writes its key only at the revision it wrote last. So
// a key that shows another term at a revision after the lease's own proves
// that the term has ended for good, however old the answer. Anything else
// that ends it is proved by a write (Ended).
func Session(lockRev uint64, s Sighting, sameTerm bool) (ended, ask bool) {
	held := s.State == Held || s.State == Bound
	switch {
	case s.Rev == 0:
		return false, true
	case s.State == Unknown:
		return false, false // not a lease: it holds its leases until an operator deletes it
	case held && !sameTerm:
		// Another term took the key: the session ended, but only an answer
		// given after the lease was written shows that; an older one may
		// predate the session's term.
		return s.Rev > lockRev, false
	case s.State == Bound:
		return false, false // not a session (itself under one): held
	}
	return false, true
}

// Ended returns whether the session whose key's last message is s has
// ended, given d, the decision on that key, and the write that must land
// before a lease written at lockRev under it is taken: a value unchanged
// for its TTL, a key vanished for the bucket's maximum TTL, an empty
// subject, or a marker older than the lease are what an old answer can
// show of a session that lives, so each is proved by a compare-and-swap
// over the session's key at the revision read. A marker after the lease
// needs none: the term can never write again.
func Ended(lockRev uint64, session string, s Sighting, d Decision) (bool, *Proof) {
	switch {
	case d.Verdict != Take:
		return false, nil
	case (s.State == Free || s.State == Marker) && s.Rev > lockRev:
		return true, nil
	}
	return true, &Proof{Session: session, Rev: s.Rev}
}
