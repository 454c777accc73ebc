package leasehold

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/asterforge/aster/lease"
)

// modelConfigs are the lease configurations the model test draws from: the
// defaults (margins a tenth of each write's TTL), and explicit margins,
// under which short Extends are refused before anything is sent.
var modelConfigs = []lease.Config{
	{TTL: 10 * time.Second},
	{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: 500 * time.Millisecond, StopTimeout: time.Second},
}

// modelTTLs are the TTLs Extends ask for: shorter and longer than 10 s.
// They are drawn as strings, so that rapid prints them readably.
var modelTTLs = []string{"1s", "2s", "5s", "10s", "30s"}

// TestWatchdogModel runs a Hold and its Watchdog, in virtual time, against
// a scripted store and a model of the server behind it (scriptStore), and
// draws random interleavings of: renewals answered at once or late, that
// succeed, fail, or get no answer although they landed (or landed later);
// Extends to longer and shorter TTLs, at any moment (while a renewal is in
// flight, while a timer's callback has fired but not yet run); timer
// callbacks held back and run late; pauses of the whole process; and
// stops. After every step it checks that
//
//   - whenever Token succeeds, the write the server holds last has not
//     expired by the server's rule with the clock rates the margin allows:
//     now < its receive time + its TTL - SafetyMargin (a write is received
//     no earlier than it was sent; the model takes the earliest); and,
//     which extends that to every instant until the next step, a held
//     lease's ValidUntil is never later than that;
//   - a lease whose renewals have all succeeded promptly (answered at the
//     instant they were sent, with no time passing while a callback was
//     held, and no pause) is not poisoned and its token is valid.
//
// The default run is short; run more with -rapid.checks=N (and longer
// sequences with -rapid.steps=N).
func TestWatchdogModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) { runWatchdogModel(t) })
	})
}

func runWatchdogModel(t *rapid.T) {
	cfg := modelConfigs[rapid.IntRange(0, len(modelConfigs)-1).Draw(t, "config")]
	t.Logf("TTL %v, RenewInterval %v, SafetyMargin %v, StopTimeout %v", cfg.TTL, cfg.RenewInterval,
		cfg.SafetyMargin, cfg.StopTimeout)
	r := newScriptRig(t, cfg, rapid.Uint64().Draw(t, "jitter seed"))
	t.Cleanup(r.close)
	healthy := true
	now := func() time.Duration { return r.at(time.Now()) }
	t.Repeat(map[string]func(*rapid.T){
		"": func(*rapid.T) {
			r.checkSafe()
			if healthy {
				r.checkHealthy()
			}
		},
		"advance": func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(1, 10_000).Draw(t, "ms")) * time.Millisecond
			hold := rapid.Bool().Draw(t, "hold the callback of a timer that fires")
			busy := r.store.inFlight() != nil || r.timers.heldCount() > 0
			var passed time.Duration
			if hold {
				passed = r.advanceHolding(d)
			} else {
				passed = r.advance(d)
			}
			if busy && passed > 0 {
				healthy = false // a renewal answered late, or a callback run late
			}
			t.Logf("%v: advanced %v%s", now(), passed, r.describe())
		},
		"answer": func(t *rapid.T) {
			if r.store.inFlight() == nil {
				t.Skip("no renewal in flight")
			}
			o := rapid.SampledFrom(outcomes).Draw(t, "outcome")
			got := r.answer(o)
			if got != answerOK {
				healthy = false
			}
			t.Logf("%v: answered %q%s", now(), got, r.describe())
		},
		"landLate": func(t *rapid.T) {
			late := r.store.lateCandidates()
			if len(late) == 0 {
				t.Skip("no unanswered write can land")
			}
			c := late[rapid.IntRange(0, len(late)-1).Draw(t, "write")]
			r.store.landLate(c)
			r.settle()
			t.Logf("%v: the write sent at %v (TTL %v) landed late%s", now(), r.at(c.sent), c.l.TTL, r.describe())
		},
		"extend": func(t *rapid.T) {
			if r.stopped {
				t.Skip("stopped")
			}
			ttl, err := time.ParseDuration(rapid.SampledFrom(modelTTLs).Draw(t, "ttl"))
			if err != nil {
				t.Fatalf("modelTTLs: %v", err)
			}
			r.extend(ttl)
			t.Logf("%v: Extend(%v) sent%s", now(), ttl, r.describe())
		},
		"runHeldTimer": func(t *rapid.T) {
			n := r.timers.heldCount()
			if n == 0 {
				t.Skip("no callback held")
			}
			r.release(rapid.IntRange(0, n-1).Draw(t, "callback"))
			t.Logf("%v: ran a held timer callback%s", now(), r.describe())
		},
		"pause": func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(1, 10_000).Draw(t, "ms")) * time.Millisecond
			r.timers.setHold(false, true)
			time.Sleep(d)
			r.settle()
			r.timers.setHold(false, false)
			for r.timers.heldCount() > 0 {
				r.release(0)
			}
			healthy = false
			t.Logf("%v: paused %v%s", now(), d, r.describe())
		},
		"stop": func(t *rapid.T) {
			if r.stopped {
				t.Skip("stopped")
			}
			// Nothing happens after a stop: keep it rare, so that most
			// runs go on long enough to interleave much.
			if rapid.IntRange(0, 9).Draw(t, "stop now if 0") != 0 {
				t.Skip("not now")
			}
			r.stop()
			healthy = false
			t.Logf("%v: released and stopped", now())
		},
	})
}

// describe summarises the Hold and the store for the log of a run.
func (r *scriptRig) describe() string {
	s := fmt.Sprintf("; valid until %v", r.at(r.hold.ValidUntil()))
	if err := r.hold.Err(); err != nil {
		s += fmt.Sprintf(", ended: %v", err)
	}
	if c := r.store.inFlight(); c != nil {
		s += fmt.Sprintf("; renewal (TTL %v) in flight since %v", c.l.TTL, r.at(c.sent))
	}
	if n := r.timers.heldCount(); n > 0 {
		s += fmt.Sprintf("; %d callback(s) held", n)
	}
	bound, w := r.bound()
	return s + fmt.Sprintf("; server: last write received at %v, TTL %v, bound %v", r.at(w.recv), w.ttl, r.at(bound))
}
