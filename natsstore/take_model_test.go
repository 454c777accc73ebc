package natsstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// modelTTL is the TTL of the model's leases, on the shared virtual clock:
// long enough that the server's own expiry (real time, TTL plus the
// grace) never comes within a run.
const modelTTL = 10 * time.Second

// TestTakeModel checks the store's take decision against a real server and
// a model of who may act. A holder takes a session and a lock under it,
// then renews the session, releases the lock or the session, or stops, at
// times rapid draws on a virtual clock shared by both stores; a contender
// tries to take the lock (with a lease of its own or under a session of its
// own) and sees every read of the session's key and of the lock's key
// either as the server answers it or as any earlier answer: a late answer
// (read then, acted on now) or a stale one (a deposed stream leader's).
//
// Invariant: a take succeeds only when the lease it displaces has ended by
// its holder's own validity: the holder released the lock or its session,
// or the virtual time is past the send time of the holder's last
// successful session write plus the TTL. (Both stores run on one clock, so
// no clock-rate margin applies; the holder's validity is measured as its
// Hold would, from the write's send time.)
//
// Before 498f91b it fails on a stale answer for the session's key: the
// lock was taken by a compare-and-swap on the lock's own key, which the
// session's renewals never move.
func TestTakeModel(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var runs atomic.Int64
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := newTakeModel(rt, srv.ClientURL(), mode, fmt.Sprintf("model_%d", runs.Add(1)))
				defer m.close()
				rt.Repeat(map[string]func(*rapid.T){
					// Ending the holder's hold ends a run's interest: it
					// gets one entry, the rest two.
					"advance":  m.advance,
					"advance ": m.advance,
					"renew":    m.renew,
					"renew ":   m.renew,
					"take":     m.take,
					"take ":    m.take,
					"release":  m.release,
					"":         m.check,
				})
			})
		})
	}
}

// answers records every answer the server gave to a store's reads of one
// key and replays one of them when told to.
type answers struct {
	seen  []answer
	plays []int // for the next reads: -1 the server's answer, else an index into seen
}

type answer struct {
	m   *jetstream.RawStreamMsg
	err error
}

func (a *answers) answer(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
	a.seen = append(a.seen, answer{m, err})
	if len(a.plays) == 0 {
		return m, err
	}
	i := a.plays[0]
	a.plays = a.plays[1:]
	if i < 0 || i >= len(a.seen) {
		return m, err
	}
	return a.seen[i].m, a.seen[i].err
}

// draw chooses how the next reads are answered.
func (a *answers) draw(rt *rapid.T, label string) {
	a.plays = a.plays[:0]
	if len(a.seen) == 0 {
		return
	}
	for i := range 3 {
		a.plays = append(a.plays, rapid.IntRange(-1, len(a.seen)-1).Draw(rt, fmt.Sprintf("%s read %d", label, i)))
	}
}

type takeModel struct {
	holder, contender *natsstore.Store
	nc                *nats.Conn
	js                jetstream.JetStream
	bucket            string
	clock             *testClock
	start             time.Time
	session, lock     *answers

	sess, lk   lease.Lease
	own        lease.Lease // the contender's session, when it claims under one
	validUntil time.Time   // the holder's validity: its last session write's send time + TTL
	lost       bool        // the holder was told it lost its session
	released   bool        // the holder released the lock or its session: it no longer acts
	taken      bool        // the contender took the lock: the run is over
	log        []string
}

func newTakeModel(rt *rapid.T, url string, mode natsstore.ExpiryMode, bucket string) *takeModel {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := natsstore.Config{Bucket: bucket, Expiry: mode, MaxTTL: 2 * modelTTL}
	open := func() *natsstore.Store {
		s, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}}, cfg)
		if err != nil {
			rt.Fatalf("dial: %v", err)
		}
		return s
	}
	m := &takeModel{holder: open(), contender: open(), bucket: bucket, clock: newTestClock(),
		session: &answers{}, lock: &answers{}}
	nc, err := nats.Connect(url)
	if err != nil {
		rt.Fatalf("connect: %v", err)
	}
	m.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		rt.Fatalf("jetstream: %v", err)
	}
	m.js = js
	m.start = m.clock.now()
	natsstore.SetClock(m.holder, m.clock.now)
	natsstore.SetClock(m.contender, m.clock.now)
	natsstore.AnswerReads(m.contender, "session.a", m.session.answer)
	natsstore.AnswerReads(m.contender, "job", m.lock.answer)

	m.sess = m.mustAcquire(rt, func(ctx context.Context) (lease.Acquisition, error) {
		return m.holder.Acquire(ctx, modelClaim("session.a", "owner-a"))
	})
	m.validUntil = m.clock.now().Add(modelTTL)
	m.lk = m.mustAcquire(rt, func(ctx context.Context) (lease.Acquisition, error) {
		return m.holder.AcquireUnder(ctx, modelClaim("job", "owner-a"), m.sess)
	})
	if rapid.Bool().Draw(rt, "contender under a session") {
		m.own = m.mustAcquire(rt, func(ctx context.Context) (lease.Acquisition, error) {
			return m.contender.Acquire(ctx, modelClaim("session.b", "owner-b"))
		})
	}
	return m
}

func modelClaim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-" + owner, TTL: modelTTL}
}

func (m *takeModel) mustAcquire(rt *rapid.T, acquire func(context.Context) (lease.Acquisition, error)) lease.Lease {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := acquire(ctx)
	if err != nil || !a.Acquired {
		rt.Fatalf("setup: acquired %v, err %v", a.Acquired, err)
	}
	return a.Lease
}

func (m *takeModel) close() {
	m.holder.Close()
	m.contender.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.js.DeleteKeyValue(ctx, m.bucket)
	m.nc.Close()
}

func (m *takeModel) note(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("t=%v: ", m.clock.now().Sub(m.start).Round(time.Millisecond))+
		fmt.Sprintf(format, args...))
}

func ctxModel() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func (m *takeModel) advance(rt *rapid.T) {
	// Around the TTL, where the decision turns, and anywhere up to 1.5 TTL.
	d := rapid.OneOf(
		rapid.SampledFrom([]time.Duration{modelTTL / 4, modelTTL / 2, modelTTL - time.Millisecond, modelTTL,
			modelTTL + time.Millisecond}),
		rapid.Map(rapid.Int64Range(0, int64(3*modelTTL/2/time.Millisecond)),
			func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }),
	).Draw(rt, "advance")
	m.clock.advance(d)
	m.note("advanced %v", d)
}

// renew renews the holder's session, as its watchdog would, while the
// holder still acts.
func (m *takeModel) renew(rt *rapid.T) {
	if m.taken || m.lost || m.released {
		rt.Skip("the holder no longer renews")
	}
	ctx, cancel := ctxModel()
	defer cancel()
	sent := m.clock.now()
	l, err := m.holder.Renew(ctx, m.sess)
	switch {
	case err == nil:
		m.sess, m.validUntil = l, sent.Add(modelTTL)
		m.note("session renewed at revision %d", l.Revision)
	default:
		// Lost: it stops acting at once, but the model keeps its validity
		// as it was (the check must not rest on the holder's luck in
		// hearing of it).
		m.lost = true
		m.note("session renewal failed: %v", err)
	}
}

// release has the holder release the lock or its session.
func (m *takeModel) release(rt *rapid.T) {
	if m.taken || m.lost || m.released {
		rt.Skip("the holder no longer holds")
	}
	what, l := "lock", m.lk
	if rapid.Bool().Draw(rt, "the session") {
		what, l = "session", m.sess
	}
	ctx, cancel := ctxModel()
	defer cancel()
	if err := m.holder.Release(ctx, l); err == nil {
		m.released = true
		m.note("%s released", what)
	}
}

// take has the contender try the lock with its reads answered as drawn.
func (m *takeModel) take(rt *rapid.T) {
	if m.taken {
		rt.Skip("taken")
	}
	m.session.draw(rt, "session")
	m.lock.draw(rt, "lock")
	ctx, cancel := ctxModel()
	defer cancel()
	c := modelClaim("job", "owner-b")
	var a lease.Acquisition
	var err error
	if m.own.ID != "" {
		a, err = m.contender.AcquireUnder(ctx, c, m.own)
	} else {
		a, err = m.contender.Acquire(ctx, c)
	}
	m.session.plays, m.lock.plays = nil, nil
	if err != nil || !a.Acquired {
		m.note("take refused (err %v, held by %q)", err, a.Holder.OwnerID)
		return
	}
	m.taken = true
	now := m.clock.now()
	m.note("lock taken, token %d", a.Lease.Token)
	if !m.released && now.Before(m.validUntil) {
		rt.Fatalf("two owners: the lock was taken %v before the holder's validity ended\n%s",
			m.validUntil.Sub(now), joinLines(m.log))
	}
}

func (m *takeModel) check(*rapid.T) {}

func joinLines(lines []string) string {
	var out string
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}
