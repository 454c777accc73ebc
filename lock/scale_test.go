package lock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// lagRecorder measures how late each renewal of many locks is sent,
// relative to when it was due (the send time of the previous successful
// write plus the renew period). It is allocated up front, so that it does
// not count in a heap measurement, and it is safe for the watchdogs'
// concurrent hooks: each lock's state is only touched by its own watchdog,
// through atomics.
type lagRecorder struct {
	base   time.Time
	cfg    lock.Config
	due    []atomic.Int64 // per lock: when its next renewal is due, ns since base
	counts []atomic.Int32 // per lock: renewals
	lags   []atomic.Int64 // every renewal's lag, ns
	n      atomic.Int64   // renewals recorded (may exceed len(lags))
	// steady holds the lags of renewals after each lock's first: the
	// first renewals of locks acquired in a burst come due in a burst.
	steady  []atomic.Int64
	nSteady atomic.Int64
	poison  atomic.Int64
	failed  atomic.Int64
}

func newLagRecorder(cfg lock.Config, locks, renewals int) *lagRecorder {
	return &lagRecorder{base: time.Now(), cfg: cfg, due: make([]atomic.Int64, locks),
		counts: make([]atomic.Int32, locks), lags: make([]atomic.Int64, renewals),
		steady: make([]atomic.Int64, renewals)}
}

// index reads the lock number from a lease ID "res.<n>".
func index(leaseID string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(leaseID, "res."))
	if err != nil {
		panic(leaseID)
	}
	return i
}

// sent recovers the send time of the write behind a ValidUntil: validity =
// sent + TTL - margin.
func (r *lagRecorder) sent(validUntil time.Time, ttl time.Duration) time.Time {
	c := lease.Config{TTL: ttl, SafetyMargin: r.cfg.SafetyMargin}
	return validUntil.Add(-(ttl - c.EffectiveSafetyMargin()))
}

func (r *lagRecorder) period(ttl time.Duration) time.Duration {
	c := lease.Config{TTL: ttl, RenewInterval: r.cfg.RenewInterval}
	return lease.RenewPeriod(c.EffectiveRenewInterval(), ttl)
}

// acquired records a new lock's first due time.
func (r *lagRecorder) acquired(g *lock.Guard) {
	sent := r.sent(g.ValidUntil(), g.TTL())
	r.due[index(g.Resource())].Store(int64(sent.Add(r.period(g.TTL())).Sub(r.base)))
}

func (r *lagRecorder) hook(ev lock.Event) {
	switch e := ev.(type) {
	case lock.LockRenewed:
		i := index(e.LeaseID)
		sent := r.sent(e.ValidUntil, e.TTL)
		at := int64(sent.Sub(r.base))
		if due := r.due[i].Load(); due != 0 {
			if k := r.n.Add(1) - 1; k < int64(len(r.lags)) {
				r.lags[k].Store(at - due)
			}
			if r.counts[i].Load() > 0 {
				if k := r.nSteady.Add(1) - 1; k < int64(len(r.steady)) {
					r.steady[k].Store(at - due)
				}
			}
		}
		r.counts[i].Add(1)
		r.due[i].Store(at + int64(r.period(e.TTL)))
	case lock.LockPoisoned:
		r.poison.Add(1)
	case lock.LockRenewalFailed:
		r.failed.Add(1)
	}
}

// quantiles returns the lags at the given quantiles, the largest, and the
// number of renewals measured.
func (r *lagRecorder) quantiles(qs ...float64) (out []time.Duration, maxLag time.Duration, n int) {
	return quantiles(r.lags, &r.n, qs...)
}

// steadyQuantiles is quantiles over the renewals after each lock's first.
func (r *lagRecorder) steadyQuantiles(qs ...float64) (out []time.Duration, maxLag time.Duration, n int) {
	return quantiles(r.steady, &r.nSteady, qs...)
}

func quantiles(rec []atomic.Int64, count *atomic.Int64, qs ...float64) (out []time.Duration, maxLag time.Duration, n int) {
	n = int(min(count.Load(), int64(len(rec))))
	lags := make([]int64, n)
	for i := range lags {
		lags[i] = rec[i].Load()
	}
	slices.Sort(lags)
	for _, q := range qs {
		if n == 0 {
			out = append(out, 0)
			continue
		}
		out = append(out, time.Duration(lags[min(int(q*float64(n)), n-1)]))
	}
	if n > 0 {
		maxLag = time.Duration(lags[n-1])
	}
	return out, maxLag, n
}

func TestThousandLocksRenewOnSchedule(t *testing.T) {
	const locks, periods = 1000, 10
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		defer mem.Close()
		cfg := lock.Config{TTL: 3 * time.Second} // renewed every second
		rec := newLagRecorder(cfg, locks, locks*periods)
		cfg.OnEvent = rec.hook
		l, err := lock.New(mem, cfg)
		require.NoError(t, err)
		guards := make([]*lock.Guard, locks)
		for i := range guards {
			guards[i], err = l.TryAcquire(t.Context(), fmt.Sprint("res.", i))
			require.NoError(t, err)
			rec.acquired(guards[i])
		}
		assert.Equal(t, locks, l.Held())

		time.Sleep(periods*time.Second + 500*time.Millisecond)
		synctest.Wait()
		for i, g := range guards {
			// Locks taken in a burst renew first early, at a random point
			// of the period (leasehold.Pacer), and every period after.
			require.Contains(t, []int32{periods, periods + 1}, rec.counts[i].Load(), "renewals of lock %d", i)
			_, err := g.Token()
			require.NoError(t, err)
			owner, _, ok := mem.Holder(g.Resource())
			require.True(t, ok)
			require.Equal(t, g.OwnerID(), owner.OwnerID)
		}
		qs, maxLag, n := rec.quantiles(0.99)
		assert.Equal(t, locks*periods, n)
		assert.Zero(t, qs[0])
		assert.Zero(t, maxLag, "in virtual time no renewal is sent after it is due")
		sqs, sMax, _ := rec.steadyQuantiles(0.01)
		assert.Zero(t, sqs[0], "after the first, every renewal is sent exactly when due")
		assert.Zero(t, sMax, "after the first, every renewal is sent exactly when due")
		assert.Zero(t, rec.poison.Load())
		assert.Zero(t, rec.failed.Load())

		require.NoError(t, l.Close(context.Background()))
		for _, g := range guards {
			_, _, ok := mem.Holder(g.Resource())
			require.False(t, ok, "Close released %s", g.Resource())
		}
	})
}
