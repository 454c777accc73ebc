package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

// Status says why a supervisor that does not lead waits, and until when
// (issue 32: an operator saw "standby" and nothing else for two minutes).
// The in-memory store reports Acquisition.ExpiresIn as natsstore does; the
// NATS test beside these checks a vanished key against a real server.

func TestStatusWaitsForTheHoldersTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		t0 := time.Now()
		s := r.supervisor(t, standbyConfig(r))
		run := start(s)
		time.Sleep(5 * time.Second) // a few polls, and node-b does not renew
		st := s.Status()
		assert.Equal(t, StateStandby, st.State)
		assert.Equal(t, WaitHeld, st.Wait)
		assert.Equal(t, t0.Add(time.Minute), st.WaitUntil, "free once node-b's TTL has run out")
		assert.Equal(t, "node-b", st.Holder.OwnerID)
		assert.Empty(t, st.LastError)

		time.Sleep(time.Minute)
		st = s.Status()
		assert.Equal(t, StateLeading, st.State)
		assert.Equal(t, WaitNone, st.Wait)
		assert.Zero(t, st.WaitUntil)
		require.NoError(t, run.stop())
	})
}

func TestStatusWaitsForAVanishedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		t0 := time.Now()
		s := r.supervisor(t, standbyConfig(r))
		run := start(s)
		time.Sleep(5 * time.Second)
		require.Equal(t, WaitHeld, s.Status().Wait)
		r.mem.Tamper(testLease, "", 0) // deleted by hand: node-b may act until its TTL has run out
		time.Sleep(5 * time.Second)

		st := s.Status()
		assert.Equal(t, StateStandby, st.State)
		assert.Equal(t, WaitVanished, st.Wait)
		assert.Equal(t, t0.Add(time.Minute), st.WaitUntil, "the store's wait for the vanished key")
		assert.Empty(t, st.Holder.OwnerID, "nobody holds it")
		assert.True(t, st.RetryAt.Before(st.WaitUntil.Add(time.Millisecond)), "tried again by then")
		b, err := json.Marshal(st)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"wait":"vanished"`)
		assert.Contains(t, string(b), `"wait_until":`)

		time.Sleep(time.Minute)
		assert.Equal(t, StateLeading, s.Status().State)
		require.NoError(t, run.stop())
	})
}

func TestStatusWaitsForAnOperatorOnACorruptKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.faults.SilenceWatch(true)
		corrupt := fmt.Errorf("key %q is not an aster lease; delete it: %w", testLease, lease.ErrCorrupt)
		r.faults.FailNext(leasetest.OpAcquire, 3, corrupt)
		s := r.supervisor(t, standbyConfig(r))
		run := start(s)
		time.Sleep(2 * time.Second) // two failed attempts: 1 s, then [1 s, 2 s]
		st := s.Status()
		assert.Equal(t, StateStandby, st.State)
		assert.Equal(t, WaitCorrupt, st.Wait)
		assert.Zero(t, st.WaitUntil, "no end until an operator deletes the key")
		assert.False(t, st.RetryAt.IsZero(), "it still looks again")
		assert.Contains(t, st.LastError, "is not an aster lease")
		assert.False(t, st.LastErrorAt.IsZero())
		assert.Zero(t, st.LastErrorCleared, "the error still stands")

		time.Sleep(time.Minute) // fixed: the fourth attempt acquires
		st = s.Status()
		require.Equal(t, StateLeading, st.State)
		assert.Contains(t, st.LastError, "is not an aster lease", "kept for the record")
		assert.True(t, st.LastErrorCleared.After(st.LastErrorAt), "but marked as past")
		require.NoError(t, run.stop())
	})
}

func TestStatusWaitsForABackoffAfterErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.faults.SilenceWatch(true)
		r.mem.Tamper(testLease, "node-b", time.Hour)
		r.faults.FailNext(leasetest.OpAcquire, 1, lease.ErrUnavailable)
		s := r.supervisor(t, standbyConfig(r))
		run := start(s)
		synctest.Wait()
		st := s.Status()
		assert.Equal(t, WaitBackoff, st.Wait)
		assert.Equal(t, st.RetryAt, st.WaitUntil)
		assert.WithinRange(t, st.WaitUntil, time.Now().Add(750*time.Millisecond), time.Now().Add(1250*time.Millisecond))
		assert.ErrorContains(t, errors.New(st.LastError), "unavailable")
		assert.Zero(t, st.LastErrorCleared)

		time.Sleep(2 * time.Second) // the store answers: held by node-b
		st = s.Status()
		assert.Equal(t, WaitHeld, st.Wait)
		assert.NotEmpty(t, st.LastError)
		assert.False(t, st.LastErrorCleared.IsZero(), "the store answered since")
		require.NoError(t, run.stop())
	})
}

func TestStatusWaitsForAHoldOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		s := r.supervisor(t, standbyConfig(r))
		run := start(s)
		synctest.Wait()
		require.Equal(t, StateLeading, s.Status().State)
		require.NoError(t, s.Resign(context.Background(), 30*time.Second))
		resigned := time.Now()
		synctest.Wait()
		st := s.Status()
		assert.Equal(t, StateStandby, st.State)
		assert.Equal(t, WaitHoldOff, st.Wait)
		assert.Equal(t, resigned.Add(30*time.Second), st.WaitUntil)
		assert.Equal(t, st.HoldOffUntil, st.WaitUntil)

		time.Sleep(31 * time.Second)
		assert.Equal(t, StateLeading, s.Status().State)
		require.NoError(t, run.stop())
	})
}

func TestStatusWaitsForARestartBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := WorkloadFunc(func(context.Context, lease.Token) error { return errors.New("boom") })
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Minute, Cap: time.Minute}}
		s := r.supervisor(t, cfg)
		run := start(s)
		synctest.Wait()
		st := s.Status()
		require.Equal(t, StateRestarting, st.State)
		assert.Equal(t, WaitRestart, st.Wait)
		assert.Equal(t, st.RetryAt, st.WaitUntil)
		assert.True(t, st.WaitUntil.After(time.Now()))
		assert.Contains(t, st.LastError, "boom")
		require.NoError(t, run.stop())
	})
}

// The loss of a lease stays the last error while the standby that lost it
// waits for its vanished key: the store's answers do not clear it, the next
// term does.
func TestStatusKeepsALostLeaseAsTheErrorUntilTheNextTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		cfg := standbyConfig(r)
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Immediate: true}}
		s := r.supervisor(t, cfg)
		run := start(s)
		synctest.Wait()
		require.Equal(t, StateLeading, s.Status().State)
		r.mem.Tamper(testLease, "", 0) // deleted by hand: its next renewal is lost
		time.Sleep(5 * time.Second)

		st := s.Status()
		require.Equal(t, StateStandby, st.State)
		assert.Equal(t, WaitVanished, st.Wait)
		assert.NotEmpty(t, st.LastError)
		assert.Zero(t, st.LastErrorCleared, "the loss still explains the wait")

		time.Sleep(10 * time.Second) // the TTL has run out: a new term
		st = s.Status()
		require.Equal(t, StateLeading, st.State)
		assert.False(t, st.LastErrorCleared.IsZero(), "cleared by the new term")
		require.NoError(t, run.stop())
	})
}
