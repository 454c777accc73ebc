package shard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
	"github.com/asterforge/aster/supervision"
)

func TestStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 10)
		a := r.start("node-a")
		r.start("node-b")
		r.awaitBalance(time.Now(), time.Second)
		time.Sleep(time.Second)

		st := a.host.Status()
		assert.Equal(t, "node-a", st.OwnerID)
		assert.Equal(t, prefix, st.Prefix)
		assert.Equal(t, shard.StateActive, st.State)
		assert.True(t, st.Balanced)
		assert.True(t, st.UnbalancedSince.IsZero())
		assert.Equal(t, 5, st.Target)
		assert.Equal(t, 5, st.Owned)
		require.Len(t, st.Members, 2)
		assert.Equal(t, shard.Member{OwnerID: "node-a", Meta: map[string]string{"addr": "node-a:7000"}, Self: true,
			Holds: 5, Target: 5}, st.Members[0])
		assert.Equal(t, "node-b", st.Members[1].OwnerID)
		assert.False(t, st.Members[1].Self)
		require.Len(t, st.Shards, 10)
		holders := r.holders()
		for _, ss := range st.Shards {
			assert.Equal(t, holders[ss.Name], ss.Holder, ss.Name)
			assert.Equal(t, ss.Holder, ss.Target, ss.Name)
			assert.NotZero(t, ss.Token)
			if ss.Holder == "node-a" {
				require.NotNil(t, ss.Local, ss.Name)
				assert.Equal(t, actors.StateLeading, ss.Local.State)
				assert.Equal(t, ss.Token, ss.Local.Token)
				assert.Equal(t, shard.ShardKey(prefix, ss.Name), ss.Local.LeaseID)
			} else {
				assert.Nil(t, ss.Local, ss.Name)
			}
		}
		assert.Empty(t, st.LastError)
	})
}

// TestQuarantine: a shard whose workload keeps failing gives up on its
// member; it stays placed there, quarantined, and runs again afterwards.
// It does not crash its way through the fleet.
func TestQuarantine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 6)
		bad := "tenant/3"
		r.tune = func(c *shard.Config) {
			good := c.Workload
			c.Workload = func(s string) actors.Workload {
				if s != bad {
					return good(s)
				}
				return actors.WorkloadFunc(func(context.Context, lease.Token) error { return errors.New("poison tenant") })
			}
			c.Restart = actors.RestartPolicy{Backoff: supervision.Backoff{Base: 100 * time.Millisecond, Cap: 100 * time.Millisecond},
				Intensity: 2, Period: time.Minute}
			c.Quarantine = 30 * time.Second
		}
		r.start("node-a")
		r.start("node-b")
		time.Sleep(5 * time.Second)
		q := since[shard.ShardQuarantined](r.check, 0)
		require.Len(t, q, 1)
		assert.Equal(t, bad, q[0].Shard)
		assert.ErrorIs(t, q[0].Err, actors.ErrTooManyRestarts)
		owner := ""
		for _, e := range r.check.events {
			if ev, ok := e.ev.(shard.ShardQuarantined); ok && ev.Shard == bad {
				owner = e.member
			}
		}
		st := r.hosts[owner].host.Status()
		for _, ss := range st.Shards {
			if ss.Name == bad {
				assert.Equal(t, owner, ss.Target, "it stays placed on its member")
				assert.False(t, ss.QuarantinedUntil.IsZero())
				assert.Nil(t, ss.Local)
			}
		}
		assert.Contains(t, st.LastError, "too many restarts")
		for _, ev := range since[shard.ShardStarted](r.check, 0) {
			if ev.Shard == bad {
				assert.Equal(t, "", ev.From, "no other member took it")
			}
		}
		starts := func() int {
			n := 0
			for _, ev := range since[shard.ShardStarted](r.check, 0) {
				if ev.Shard == bad {
					n++
				}
			}
			return n
		}
		before := starts()
		time.Sleep(30 * time.Second)
		assert.Greater(t, starts(), before, "it runs again after its quarantine")
	})
}

// TestSetShards: shards added at run time are placed; shards removed are
// stopped and their leases released.
func TestSetShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 8)
		r.start("node-a")
		r.start("node-b")
		r.awaitBalance(time.Now(), time.Second)

		r.shards = shard.Range("tenant", 12)
		for _, m := range r.hosts {
			require.NoError(t, m.host.SetShards(r.shards))
		}
		r.awaitBalance(time.Now(), time.Second)
		assert.Equal(t, map[string]int{"node-a": 6, "node-b": 6}, r.table())

		removed := r.shards[2:]
		r.shards = r.shards[:2]
		for _, m := range r.hosts {
			require.NoError(t, m.host.SetShards(r.shards))
		}
		time.Sleep(time.Second)
		require.True(t, r.balanced())
		for _, s := range removed {
			_, _, held := r.mem.Holder(shard.ShardKey(prefix, s))
			assert.False(t, held, "%s was removed but is held", s)
		}
		r.check.mu.Lock()
		assert.Len(t, r.check.active, 2, "the removed shards' workloads stopped")
		r.check.mu.Unlock()
		assert.ErrorIs(t, r.hosts["node-a"].host.SetShards([]string{"bad shard"}), lease.ErrInvalid)
		r.check.safe(t)
	})
}

// TestViewsThatDisagree: two members given different shard sets place some
// shards differently and compete for them. The leases keep every shard on
// one member at a time; once their sets agree, the fleet balances.
func TestViewsThatDisagree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 12)
		a, b, c := r.start("node-a"), r.start("node-b"), r.start("node-c")
		r.awaitBalance(time.Now(), time.Second)
		require.NoError(t, a.host.SetShards(shard.Range("tenant", 4)))
		require.NoError(t, b.host.SetShards(shard.Range("tenant", 20)))
		time.Sleep(30 * time.Second)
		r.check.safe(t)
		for _, m := range []*member{a, b, c} {
			require.NoError(t, m.host.SetShards(shard.Range("tenant", 20)))
		}
		r.shards = shard.Range("tenant", 20)
		r.awaitBalance(time.Now(), r.lc.TTL+time.Second)
		r.check.safe(t)
	})
}

func TestConfigValidate(t *testing.T) {
	mem := leasetestStore(t)
	valid := func() shard.Config {
		return shard.Config{Prefix: "fleet", Shards: shard.Range("tenant", 2), Lease: lease.Config{OwnerID: "node-a"},
			Store: mem, Workload: func(string) actors.Workload { return actors.WorkloadFunc(nil) }}
	}
	_, err := shard.NewHost(valid())
	require.NoError(t, err)
	for name, edit := range map[string]func(*shard.Config){
		"no prefix":             func(c *shard.Config) { c.Prefix = "" },
		"bad prefix":            func(c *shard.Config) { c.Prefix = "a b" },
		"lease ID":              func(c *shard.Config) { c.Lease.LeaseID = "x" },
		"no owner":              func(c *shard.Config) { c.Lease.OwnerID = "" },
		"owner not in a key":    func(c *shard.Config) { c.Lease.OwnerID = "pod:1" },
		"bad shard":             func(c *shard.Config) { c.Shards = []string{"a b"} },
		"empty shard":           func(c *shard.Config) { c.Shards = []string{""} },
		"no store":              func(c *shard.Config) { c.Store = nil },
		"store not a directory": func(c *shard.Config) { c.Store = struct{ lease.Store }{mem} },
		"no workload":           func(c *shard.Config) { c.Workload = nil },
		"bad meta":              func(c *shard.Config) { c.Meta = map[string]string{"a b": "c"} },
		"negative quarantine":   func(c *shard.Config) { c.Quarantine = -time.Second },
		"bad restart":           func(c *shard.Config) { c.Restart.Period = -time.Second },
		"bad TTL":               func(c *shard.Config) { c.Lease.TTL = time.Second; c.Lease.SafetyMargin = time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := valid()
			edit(&cfg)
			_, err := shard.NewHost(cfg)
			assert.ErrorIs(t, err, lease.ErrInvalid)
		})
	}
	cfg := valid()
	cfg.Store, cfg.Directory = struct{ lease.Store }{mem}, mem
	_, err = shard.NewHost(cfg)
	assert.NoError(t, err, "a Directory given apart from the Store")
}

func TestRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2)
		a := r.start("node-a")
		synctest.Wait() // Run is under way
		assert.ErrorIs(t, a.host.Run(t.Context()), shard.ErrAlreadyRunning)
		require.NoError(t, a.stop())
		assert.ErrorIs(t, a.host.Drain(t.Context()), shard.ErrInactive)
		delete(r.hosts, "node-a")
	})
}

// TestRunAgain: a Host runs again after Run returned, with the same shard
// supervisors, whose events reach the new Run.
func TestRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 4)
		a := r.start("node-a")
		r.awaitBalance(time.Now(), time.Second)
		require.NoError(t, a.stop())
		mark := r.check.mark()
		ctx, cancel := context.WithCancel(context.Background())
		a.cancel, a.err = cancel, nil
		go func() { a.done <- a.host.Run(ctx) }()
		r.awaitBalance(time.Now(), time.Second)
		assert.Len(t, since[shard.ShardStarted](r.check, mark), 4)
		assert.Equal(t, 4, a.host.Status().Owned)
		r.check.safe(t)
	})
}

// TestClosedStoreEndsRun: a store that refuses the watch for good ends Run
// with its error.
func TestClosedStoreEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2)
		require.NoError(t, r.mem.Close())
		a := r.start("node-a")
		err := <-a.done
		a.cancel()
		a.cancel = nil
		assert.ErrorIs(t, err, lease.ErrClosed)
		delete(r.hosts, "node-a")
	})
}

func TestRange(t *testing.T) {
	assert.Equal(t, []string{"tenant/0", "tenant/1", "tenant/2"}, shard.Range("tenant", 3))
	assert.Empty(t, shard.Range("tenant", 0))
	assert.Equal(t, "fleet.shards.tenant/3", shard.ShardKey("fleet", "tenant/3"))
	assert.Equal(t, "fleet.members.node-a", shard.MemberKey("fleet", "node-a"))
	for _, n := range []int{1, 10, 100} {
		assert.Len(t, shard.Range(fmt.Sprint("r", n), n), n)
	}
}

// TestFailedWorkloadRestarts: a shard whose workload fails is restarted by
// its member's restart policy. With even shares it stays where it was; with
// uneven ones the member it leaves for a moment may lose its larger share,
// and the shard moves once at most.
func TestFailedWorkloadRestarts(t *testing.T) {
	for _, tc := range []struct {
		members, shards, maxMoves int
		late                      bool // the last member joins after the others balanced
	}{
		{members: 2, shards: 8, maxMoves: 0},
		{members: 3, shards: 10, maxMoves: 1},
		{members: 3, shards: 10, maxMoves: 1, late: true},
		{members: 4, shards: 11, maxMoves: 1, late: true},
	} {
		t.Run(fmt.Sprintf("%d on %d late %v", tc.shards, tc.members, tc.late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, tc.shards)
				var mu sync.Mutex
				fail := map[string]chan struct{}{} // closed: the shard's workload fails
				failing := func(s string) chan struct{} {
					mu.Lock()
					defer mu.Unlock()
					if fail[s] == nil {
						fail[s] = make(chan struct{})
					}
					return fail[s]
				}
				r.tune = func(c *shard.Config) {
					c.Workload = func(s string) actors.Workload {
						return actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
							select {
							case <-ctx.Done():
								return nil
							case <-failing(s):
								mu.Lock()
								fail[s] = nil // once
								mu.Unlock()
								return errors.New("a transient failure")
							}
						})
					}
					c.Restart = actors.RestartPolicy{Backoff: supervision.Backoff{Base: 100 * time.Millisecond, Cap: 100 * time.Millisecond}}
				}
				for i := range tc.members {
					if tc.late && i == tc.members-1 {
						r.awaitBalance(time.Now(), time.Second)
					}
					r.start(fmt.Sprintf("node-%d", i))
				}
				r.awaitBalance(time.Now(), time.Second)
				total := 0
				for round := range 3 {
					// The victim: the first shard of a member with the larger share.
					counts, holders := r.table(), r.holders()
					victim := ""
					for _, s := range r.shards {
						if counts[holders[s]] == (tc.shards+tc.members-1)/tc.members {
							victim = s
							break
						}
					}
					mark := r.check.mark()
					close(failing(victim))
					time.Sleep(5 * time.Second)
					r.awaitBalance(time.Now(), time.Second)
					moves := 0
					for _, ev := range since[shard.ShardStarted](r.check, mark) {
						if ev.From != "" {
							moves++
						}
					}
					t.Logf("round %d: %s failed on %s; %d moves; now on %s", round, victim, holders[victim], moves, r.holders()[victim])
					total += moves
				}
				assert.LessOrEqual(t, total, tc.maxMoves, "a failing shard moves once at most, then stays")
				r.check.safe(t)
			})
		})
	}
}

// flakyDir is a Directory whose first watch fails and whose watches the
// test can end.
type flakyDir struct {
	*shardtest.MemStore
	mu     sync.Mutex
	calls  int
	cancel context.CancelFunc
}

func (d *flakyDir) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls == 1 {
		return nil, nil, fmt.Errorf("%w: not yet", lease.ErrUnavailable)
	}
	ctx, d.cancel = context.WithCancel(ctx)
	return d.MemStore.WatchPrefix(ctx, prefix)
}

func (d *flakyDir) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancel()
}

// TestWatchReopens: the fleet's watch is opened again when it fails or
// ends, and its fresh snapshot replaces what was missed meanwhile.
func TestWatchReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 8)
		dir := &flakyDir{MemStore: r.mem}
		r.tune = func(c *shard.Config) { c.Directory = dir }
		a := r.start("node-a")
		r.tune = nil
		r.start("node-b")
		r.awaitBalance(time.Now(), 2*time.Second)
		assert.Contains(t, a.host.Status().LastError, "not yet")

		dir.cut()
		r.leave("node-b") // while node-a's watch is down
		took := r.awaitBalance(time.Now(), 2*time.Second)
		t.Logf("balanced %v after the watch was cut", took)
		assert.Equal(t, 8, a.host.Status().Owned)
		assert.Equal(t, 3, dir.calls)
		r.check.safe(t)
	})
}
