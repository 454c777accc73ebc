package natsstore

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// A request in flight without an answer counts as failing from its send
// time, before its own timeout returns it; a return, a move or a lost
// connection starts the count again.
func TestIsolationCountsUnansweredRequests(t *testing.T) {
	const bound = 2 * time.Second
	synctest.Test(t, func(t *testing.T) {
		iso := &isolation{start: time.Now()}
		iso.sending()
		time.Sleep(bound/4 - time.Millisecond)
		_, due := iso.probeDue(bound)
		assert.False(t, due, "probed before a quarter of the timeout")
		time.Sleep(time.Millisecond)
		silent, due := iso.probeDue(bound)
		assert.True(t, due, "a request unanswered for a quarter of the timeout is no failure")
		assert.Equal(t, bound/4, silent)

		iso.sending() // a second request does not start the count again
		time.Sleep(bound)
		assert.Equal(t, bound+bound/4, iso.unansweredFor())

		iso.done() // one returns: the other has been unanswered since
		assert.Zero(t, iso.unansweredFor())
		time.Sleep(bound / 2)
		assert.Equal(t, bound/2, iso.unansweredFor())
		iso.done()
		assert.Zero(t, iso.unansweredFor(), "nothing in flight")

		iso.sending()
		time.Sleep(bound)
		iso.moving() // nats.go fails what was in flight on the old server
		assert.Zero(t, iso.unansweredFor(), "counted across a move")
		time.Sleep(bound / 4)
		assert.Equal(t, bound/4, iso.unansweredFor())
		iso.afresh() // a lost connection
		assert.Zero(t, iso.unansweredFor())
		iso.done()

		iso.note(context.Background(), time.Now(), context.DeadlineExceeded, true) // a failure
		time.Sleep(bound / 2)
		iso.sending()
		time.Sleep(bound / 4)
		assert.Equal(t, bound/2+bound/4, iso.unansweredFor(), "the longer of failing and unanswered")
		iso.done()
	})
}

// The timeout in effect is a sixth of the shortest lease TTL the store
// writes, never above Config.IsolationTimeout nor below its minimum; a TTL
// nobody wrote for two of its TTLs no longer counts.
func TestIsolationBoundFollowsTTL(t *testing.T) {
	const configured = 2 * time.Second
	synctest.Test(t, func(t *testing.T) {
		iso := &isolation{start: time.Now()}
		assert.Equal(t, configured, iso.bound(configured), "no lease written")
		iso.serving(time.Minute)
		assert.Equal(t, configured, iso.bound(configured), "a long TTL does not raise it")
		iso.serving(3 * time.Second)
		assert.Equal(t, 500*time.Millisecond, iso.bound(configured))
		iso.serving(10 * time.Second) // a longer lease beside it
		assert.Equal(t, 500*time.Millisecond, iso.bound(configured), "the shortest counts")
		iso.serving(time.Second)
		assert.Equal(t, time.Second/6, iso.bound(configured))
		iso.serving(300 * time.Millisecond)
		assert.Equal(t, minIsolationTimeout, iso.bound(configured), "below the minimum")

		time.Sleep(600 * time.Millisecond) // two TTLs of 300 ms without a write of it
		assert.Equal(t, minIsolationTimeout, iso.bound(configured))
		time.Sleep(time.Millisecond)
		assert.Equal(t, configured, iso.bound(configured), "a TTL nobody writes any more")
		iso.serving(10 * time.Second)
		assert.Equal(t, 10*time.Second/6, iso.bound(configured))
		iso.serving(0) // a release
		assert.Equal(t, 10*time.Second/6, iso.bound(configured))
	})
}

// heldTTL reads the TTL of the held records this package writes, and
// nothing from anything else.
func TestHeldTTL(t *testing.T) {
	held := record{Kind: kindHeld, Owner: "o", Term: "t", Token: 7, TTL: 3 * time.Second, Acquired: 1, Nonce: 2,
		Meta: map[string]string{"pod": "a b"}}
	assert.Equal(t, 3*time.Second, heldTTL(appendRecord(nil, held)))
	session := held
	session.Session, session.SessionTerm = "s", "st"
	session.TTL = 15 * time.Second
	assert.Equal(t, 15*time.Second, heldTTL(appendRecord(nil, session)), "a lease under a session")
	acquiring := held
	acquiring.Token = 0
	assert.Equal(t, 3*time.Second, heldTTL(appendRecord(nil, acquiring)))
	released := held
	released.Kind, released.TTL = kindReleased, 0
	assert.Zero(t, heldTTL(appendRecord(nil, released)))
	for _, b := range []string{"", "aster.lease/2 held", "aster.lease/2 held o t 7", "aster.lease/2 held o t 7 x 1 2 -",
		"aster.lease/1 held o 7 3000 1 2", "aster.lease/2 held o t 7 99999999999 1 2 -", "probe"} {
		assert.Zero(t, heldTTL([]byte(b)), "%q", b)
	}
}

// FuzzHeldTTL: heldTTL agrees with the decoder on every held record of
// version 2 or 3 it accepts.
func FuzzHeldTTL(f *testing.F) {
	f.Add([]byte("aster.lease/2 held o t 7 3000 1 0000000000000002 -"))
	f.Add([]byte("aster.lease/3 held o t 7 15000 1 0000000000000002 - s st"))
	f.Add([]byte("aster.lease/2 released o t 7 0 1 0000000000000002 -"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := heldTTL(b)
		r, err := parseRecord(b)
		if err == nil && r.Kind == kindHeld && !r.V1 {
			require.Equal(t, r.TTL, got, "%q", b)
		} else if err == nil {
			require.Zero(t, got, "%q", b)
		}
	})
}

// The check moves a holder whose renewal goes unanswered (its server cut
// off, the probe unanswered too) well before its renew deadline, with the
// lease defaults at every TTL the store takes from 1 s: at most the
// timeout in effect after the renewal was sent, leaving at least a sixth
// of what remains before the deadline for a renewal through another server.
func TestIsolationMovesBeforeRenewDeadline(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second,
		10 * time.Second, 30 * time.Second, time.Minute} {
		t.Run(ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := lease.Config{TTL: ttl}
				start := time.Now()
				period := lease.RenewPeriod(cfg.EffectiveRenewInterval(), ttl)
				deadline := cfg.RenewDeadline(start)
				life, stop := context.WithCancel(context.Background())
				iso := &isolation{start: start}
				moved := make(chan time.Duration, 1)
				c := &isolationCheck{iso: iso, configured: DefaultIsolationTimeout, life: life,
					connected: func() bool { return true },
					probe: func(ctx context.Context) error { // no answer
						<-ctx.Done()
						return ctx.Err()
					},
					move: func(silent time.Duration, _ error) {
						iso.moving()
						moved <- time.Since(start)
					}}
				go c.run()

				// The last renewal that succeeded, then the cut.
				iso.serving(ttl)
				iso.sending()
				iso.done()
				iso.note(life, start, nil, true)
				time.Sleep(period)
				iso.serving(ttl)
				iso.sending() // the renewal, unanswered
				var at time.Duration
				select {
				case at = <-moved:
				case <-time.After(deadline.Sub(start)):
					t.Fatalf("no move before the renew deadline (+%v)", deadline.Sub(start))
				}
				bound := min(DefaultIsolationTimeout, max(ttl/isolationTTLShare, minIsolationTimeout))
				assert.LessOrEqual(t, at, period+bound, "moved %v after the renewal was sent", at-period)
				left := deadline.Sub(start) - at
				assert.GreaterOrEqual(t, left, (deadline.Sub(start)-period)/6,
					"moved at +%v, the renew deadline at +%v", at, deadline.Sub(start))
				t.Logf("TTL %v: renewal sent at +%v, moved at +%v, renew deadline +%v", ttl, period, at,
					deadline.Sub(start))
				stop()
				iso.done()
			})
		})
	}
}

// A cluster electing a stream leader quickly (a graceful step-down, about
// 125 ms) moves nobody: the stalled request is answered before the
// timeout in effect at TTL 3 s.
func TestIsolationShortElectionDoesNotMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		life, stop := context.WithCancel(context.Background())
		defer stop()
		iso := &isolation{start: start}
		c := &isolationCheck{iso: iso, configured: DefaultIsolationTimeout, life: life,
			connected: func() bool { return true },
			probe: func(ctx context.Context) error {
				return context.DeadlineExceeded // no leader yet
			},
			move: func(time.Duration, error) { t.Error("moved during a short election") }}
		go c.run()
		iso.serving(3 * time.Second)
		for range 20 {
			iso.sending()
			time.Sleep(125 * time.Millisecond) // answered when the new leader is in place
			iso.done()
			iso.note(life, time.Now(), nil, true)
			time.Sleep(time.Second)
		}
	})
}

// A probe that finds the stream working ends a failure only once it has
// lasted replicaSilence: a leader cut off more recently still looks in
// touch with its replicas, and the next probe tells.
func TestIsolationEarlyWorkingProbeKeepsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		life, stop := context.WithCancel(context.Background())
		defer stop()
		iso := &isolation{start: time.Now()}
		c := &isolationCheck{iso: iso, configured: DefaultIsolationTimeout, life: life,
			connected: func() bool { return true },
			probe:     func(context.Context) error { return nil },
			move:      func(time.Duration, error) { t.Error("moved on a working stream") }}
		iso.note(life, time.Now(), context.DeadlineExceeded, true)
		time.Sleep(replicaSilence - time.Millisecond)
		c.step()
		assert.NotZero(t, iso.failed.Load(), "ended a failure younger than replicaSilence")
		time.Sleep(time.Millisecond)
		c.step()
		assert.Zero(t, iso.failed.Load(), "kept a failure that a working stream answered after replicaSilence")
	})
}
