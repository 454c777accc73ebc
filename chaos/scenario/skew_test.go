package scenario

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/report"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

// The clock-rate scenarios run in process, in a testing/synctest bubble:
// three LeaseSupervisors share a MemStore whose clock runs at rate times the
// clients' clock, so that relative to the store (the one judge of expiry)
// every client's clock runs slow (rate > 1) or fast (rate < 1). The records
// are stamped with the clients' clock, on which their claims are made; the
// porcupine check reads them on the store's clock.
//
// Each round partitions the leader from the store (every call fails) for 3
// TTL: it must stop at its renew deadline, and another candidate takes over
// once the store has expired the lease.

type skewRun struct {
	hist    record.History
	storeOf func(int64) int64 // client time to store time
	rounds  int
}

func runSkew(t *testing.T, rate float64, rounds int) skewRun {
	var out skewRun
	synctest.Test(t, func(t *testing.T) {
		base := time.Now()
		toStore := func(c int64) int64 { return base.UnixNano() + int64(float64(c-base.UnixNano())*rate) }
		storeNow := func() time.Time { return time.Unix(0, toStore(time.Now().UnixNano())) }
		now := func() int64 { return time.Now().UnixNano() }
		mem := leasetest.NewMemStore(leasetest.WithClock(storeNow))
		defer mem.Close()
		dir := t.TempDir()
		log, err := record.Create(filepath.Join(dir, "skew.log"))
		require.NoError(t, err)
		res := resource.New(now)
		const id = "chaos.skew"

		var (
			mu    sync.Mutex
			marks []record.Mark
		)
		mark := func(kind record.MarkKind, proc string) {
			mu.Lock()
			defer mu.Unlock()
			marks = append(marks, record.Mark{Kind: kind, Proc: proc, Lease: id, At: now()})
		}

		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		faults := map[string]*leasetest.FaultStore{}
		for i := range candidates {
			proc := fmt.Sprintf("c%d", i+1)
			cfg := lease.Config{LeaseID: id, OwnerID: lease.NewOwnerID(), TTL: ttl, RenewInterval: renew,
				StandbyRetryInterval: 500 * time.Millisecond}
			fs := leasetest.NewFaultStore(mem)
			faults[proc] = fs
			sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
				Lease: cfg,
				Store: record.NewStore(fs, log, proc, cfg, now),
				Workload: actors.WorkloadFunc(func(ctx context.Context, token lease.Token) error {
					term, _ := actors.TermFrom(ctx)
					w := record.Workload{Proc: proc, Lease: id, Owner: cfg.OwnerID, Term: term.ID(), Sup: proc,
						Token: uint64(token), Start: now()}
					log.Start(w)
					defer func() { w.Stop = now(); log.Stop(w) }()
					for ctx.Err() == nil {
						res.Write(record.Write{Lease: id, Proc: proc, Owner: cfg.OwnerID, Term: term.ID(),
							Token: uint64(token), Sent: now()})
						select {
						case <-ctx.Done():
						case <-time.After(10 * time.Millisecond):
						}
					}
					return nil
				}),
				Restart: actors.RestartPolicy{Backoff: supervision.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}, Intensity: supervision.Unlimited},
			})
			require.NoError(t, err)
			wg.Go(func() { assert.NoError(t, sup.Run(ctx)) })
		}

		var token uint64
		leader := func() string {
			for range 6000 { // 60 s of virtual time
				if w, ok := res.Last(id); ok && w.Token > token {
					token = w.Token
					return w.Proc
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("no new leader after token %d", token)
			return ""
		}
		for range rounds {
			p := leader()
			time.Sleep(100 * time.Millisecond)
			mark(record.MarkNetFault, p)
			faults[p].FailAll(leasetest.OpAll, lease.ErrUnavailable)
			time.Sleep(3 * ttl)
			faults[p].FailAll(leasetest.OpAll, nil)
			mark(record.MarkNetHeal, p)
		}
		leader()
		cancel()
		wg.Wait()
		// protoactor-go's dead-letter throttle starts a goroutine that
		// outlives the actor system by up to its period; let it end while
		// the bubble's clock still moves.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.NoError(t, log.Close())

		out.hist, err = record.ReadLog(filepath.Join(dir, "skew.log"))
		require.NoError(t, err)
		out.hist.Writes = res.Writes()
		out.hist.Marks = marks
		out.storeOf = toStore
		out.rounds = rounds
	})
	return out
}

// storeOps returns r's operations stamped with the store's clock.
func (r skewRun) storeOps() []record.Op {
	ops := make([]record.Op, len(r.hist.Ops))
	for i, op := range r.hist.Ops {
		op.Call = r.storeOf(op.Call)
		if op.Return != record.Never {
			op.Return = r.storeOf(op.Return)
		}
		ops[i] = op
	}
	return ops
}

func TestClockRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		desc string
	}{
		{"clock-fast-10pct", 0.9, "in process: every client's clock 10% fast relative to the store's; the leader partitioned for 3 TTL"},
		{"clock-slow-5pct", 1.05, "in process: every client's clock 5% slow relative to the store's; the leader partitioned for 3 TTL"},
		{"clock-slow-9pct", 1.1, "in process: every client's clock 9% slow (rate 1/1.1), just inside the 10% safety margin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSkew(t, tc.rate, rounds(3, 60))
			addRow(judge(t, tc.name, r.hist, r.storeOps(), nil, tc.desc, r.rounds, "", string(record.MarkNetFault)))
		})
	}
}

// TestClockRateBeyondMargin is a control: a client clock at half the
// store's rate defeats a 10% safety margin, and the checker must say so.
func TestClockRateBeyondMargin(t *testing.T) {
	r := runSkew(t, 2, 6)
	res := check.Check(r.hist)
	kinds := map[string]int{}
	for _, v := range res.Violations {
		kinds[v.Kind]++
	}
	t.Logf("clock 50%% slow: %d handovers, violations %v", len(res.Handovers), kinds)
	assert.Positive(t, kinds[check.Overlap], "a clock slower than the margin allows must show overlapping claims")
	lin, _ := check.Linearizable(r.storeOps(), linTime)
	assert.Equal(t, porcupine.Ok, lin, "the store itself did nothing wrong")
	addControl(report.Row{Scenario: "control: clock-slow-50pct", Runs: r.rounds, Handovers: len(res.Handovers),
		Violations: len(res.Violations), Notes: fmt.Sprintf("expected: beyond the 10%% margin; found %v", kinds)})
}
