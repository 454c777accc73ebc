package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
)

func TestShards(t *testing.T) {
	srv := natstest.Start(t)
	env := map[string]string{"NATS_URL": srv.ClientURL()}
	s := store(t, srv.ClientURL(), natsstore.DefaultBucket)
	shards := shard.Range("tenant", 4)
	members := []string{"pod-a", "pod-b"}
	joined := map[string]lease.Lease{}
	for _, m := range members {
		joined[m] = take(t, s, shard.MemberKey("billing", m), m, map[string]string{"addr": m + ":80"})
	}
	placement := shard.Place(shards, members, nil)
	held := map[string]lease.Lease{}
	for _, sh := range shards {
		held[sh] = take(t, s, shard.ShardKey("billing", sh), placement[sh], map[string]string{"addr": placement[sh] + ":80"})
	}
	take(t, s, "billingx.shards.tenant/9", "pod-z", nil) // another fleet

	r := aster(t, env, "shards", "billing")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 12, r.stdout)
	assert.Regexp(t, `^SHARD\s+STATE\s+HOLDER\s+META\s+TOKEN\s+AGE\s+VALID LEFT\s+TARGET$`, lines[0])
	for i, sh := range shards {
		assert.Regexp(t, `^`+sh+`\s+held\s+`+placement[sh]+`\s+addr=`+placement[sh]+`:80\s+`+tokenString(held[sh].Token)+
			`\s+\d+(\.\d+)?m?s\s+\d+(\.\d+)?m?s\s+`+placement[sh]+`$`, lines[1+i])
	}
	assert.Equal(t, "", lines[5])
	assert.Regexp(t, `^MEMBER\s+STATE\s+META\s+HOLDS\s+TARGET\s+AGE\s+VALID LEFT$`, lines[6])
	assert.Regexp(t, `^pod-a\s+member\s+addr=pod-a:80\s+2\s+2\s+\S+\s+\S+$`, lines[7])
	assert.Regexp(t, `^pod-b\s+member\s+addr=pod-b:80\s+2\s+2\s+\S+\s+\S+$`, lines[8])
	assert.Equal(t, "", lines[9])
	assert.Equal(t, "2 members, 4 shards: balanced", lines[10])
	assert.NotContains(t, r.stdout, "billingx", "another fleet")
	assert.Contains(t, lines[11], "a shard never held has none: name them with --shards")

	// Two more shards declared, never held; one shard released.
	require.NoError(t, s.Release(ctxT(t), held["tenant/1"]))
	r = aster(t, env, "shards", "billing", "--shards", "tenant:6")
	require.Equal(t, 0, r.code, r.stderr)
	first := placement
	placement = shard.Place(shard.Range("tenant", 6), members, map[string]string{"tenant/0": first["tenant/0"],
		"tenant/2": first["tenant/2"], "tenant/3": first["tenant/3"]})
	assert.Regexp(t, `\ntenant/1\s+released\s+-\s+-\s+-\s+\S+\s+-\s+`+placement["tenant/1"]+` \*\n`, r.stdout)
	assert.Regexp(t, `\ntenant/5\s+empty\s+-\s+-\s+-\s+-\s+-\s+`+placement["tenant/5"]+` \*\n`, r.stdout)
	assert.Contains(t, r.stdout, "\n2 members, 6 shards: not balanced: 3 shards are free\n"+
		"  tenant/1: free -> "+placement["tenant/1"]+"\n  tenant/4: free -> "+placement["tenant/4"]+
		"\n  tenant/5: free -> "+placement["tenant/5"]+"\n")
	assert.NotContains(t, r.stdout, "name them with --shards")

	// pod-b leaves: its membership is released, its shards stay held.
	require.NoError(t, s.Release(ctxT(t), joined["pod-b"]))
	r = aster(t, env, "shards", "billing", "--shards", "tenant:4", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var f fleetJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &f), r.stdout)
	assert.Equal(t, "billing", f.Prefix)
	assert.Equal(t, natsstore.DefaultBucket, f.Bucket)
	assert.True(t, f.Declared)
	require.Len(t, f.Shards, 4)
	assert.Equal(t, "tenant/0", f.Shards[0].Shard)
	assert.Equal(t, "pod-a", f.Shards[0].Target, "pod-a is the only member")
	assert.Equal(t, "held", f.Shards[0].State)
	assert.Equal(t, uint64(held["tenant/0"].Token), f.Shards[0].Token)
	require.Len(t, f.Members, 2)
	assert.Equal(t, "pod-b", f.Members[1].Member)
	assert.Equal(t, "released", f.Members[1].State)
	assert.Equal(t, 0, f.Members[1].Target)
	elsewhere := 0
	for _, sh := range []string{"tenant/0", "tenant/2", "tenant/3"} {
		if first[sh] == "pod-b" {
			elsewhere++
		}
	}
	assert.Equal(t, elsewhere, f.Members[1].Holds, "a member that left may still hold shards")
	assert.Equal(t, summaryJSON{MemberCount: 1, ShardCount: 4, Moving: 0, Free: 1, Elsewhere: elsewhere}, f.summaryJSON)

	// Mistakes.
	r = aster(t, env, "shards", "bill ing")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "aster shards: PREFIX (the fleet's shard.Config.Prefix): ")
	r = aster(t, env, "shards", "billing", "--shards", "tenant:0")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `aster shards: --shards "tenant:0": NAME:N needs a name and a count of at least 1`)
	r = aster(t, env, "shards", "billing", "--bucket", "nothing_here")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `aster shards: bucket "nothing_here" not found on `+srv.ClientURL())
	// Nothing found: an error, on one line, and no verdict.
	for _, asJSON := range []bool{false, true} {
		args := []string{"shards", "nobody"}
		if asJSON {
			args = append(args, "--json")
		}
		r = aster(t, env, args...)
		assert.Equal(t, 1, r.code, "%v", args)
		assert.Equal(t, "aster shards: no leases of fleet \"nobody\" in bucket \"aster_leases\" (is the prefix, the bucket "+
			"or the account right?)\n", r.stderr, "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
	}

	// Shards declared, no member: nothing is placed, and nothing is
	// balanced.
	r = aster(t, env, "shards", "nobody", "--shards", "tenant:2", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var none fleetJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &none), r.stdout)
	assert.Equal(t, summaryJSON{ShardCount: 2, Free: 2}, none.summaryJSON)
	assert.False(t, none.Balanced)
	r = aster(t, env, "shards", "nobody", "--shards", "tenant:2")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\n0 members, 2 shards: no members: nothing is placed\n")
}

// The command and the fleet's own Hosts agree: the same targets, the same
// verdict.
func TestShardsAgreesWithHosts(t *testing.T) {
	srv := natstest.Start(t)
	shards := shard.Range("tenant", 8)
	var hosts []*shard.Host
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		nc, err := nats.Connect(srv.ClientURL(), nats.ReconnectBufSize(-1))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		st, err := natsstore.NewConn(ctxT(t), nc, natsstore.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		h, err := shard.NewHost(shard.Config{Prefix: "orders", Shards: shards, Store: st,
			Lease: lease.Config{OwnerID: name, TTL: 2 * time.Second}, Meta: map[string]string{"pod": name},
			Workload: func(string) actors.Workload {
				return actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error { <-ctx.Done(); return nil })
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		hosts = append(hosts, h)
	}
	require.Eventually(t, func() bool {
		for _, h := range hosts {
			if st := h.Status(); !st.Balanced || st.Owned != st.Target {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond)

	r := aster(t, map[string]string{"NATS_URL": srv.ClientURL()}, "shards", "orders", "--shards", "tenant:8", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var f fleetJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &f))
	assert.True(t, f.Balanced)
	assert.Equal(t, 3, f.MemberCount)
	want := map[string]string{}
	for _, ss := range hosts[0].Status().Shards {
		want[ss.Name] = ss.Target
	}
	got := map[string]string{}
	for _, row := range f.Shards {
		got[row.Shard] = row.Target
		assert.Equal(t, row.Target, row.OwnerID, "balanced: every shard is held by its target")
	}
	assert.Equal(t, want, got)
	for _, m := range f.Members {
		assert.Equal(t, map[string]string{"pod": m.Member}, m.Meta)
		assert.Contains(t, []int{2, 3}, m.Holds)
	}
}

func TestShardsWatch(t *testing.T) {
	srv := natstest.Start(t)
	s := store(t, srv.ClientURL(), natsstore.DefaultBucket)
	a := take(t, s, shard.MemberKey("billing", "pod-a"), "pod-a", nil)
	for _, asJSON := range []bool{false, true} {
		out := newLines()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		args := []string{"shards", "billing", "--shards", "tenant:1", "--watch", "--count", "3", "--server", srv.ClientURL()}
		if asJSON {
			args = append(args, "--json")
		}
		go func() { done <- run(ctx, args, func(string) string { return "" }, out, out) }()
		if asJSON {
			var f fleetJSON
			require.NoError(t, json.Unmarshal([]byte(out.next(t)), &f))
			assert.Equal(t, 1, f.MemberCount)
			assert.Equal(t, 1, f.Free)
		} else {
			for line := out.next(t); line != "1 member, 1 shard: not balanced: 1 shard is free"; line = out.next(t) {
			}
			assert.Equal(t, "  tenant/0: free -> pod-a", out.next(t))
		}

		l := take(t, s, shard.ShardKey("billing", "tenant/0"), "pod-a", nil)
		renewed, err := s.Renew(ctxT(t), l) // not a change of holder: nothing printed
		require.NoError(t, err)
		// The watch keeps only the latest event of each lease: see each
		// change before making the next one to the same key.
		perChange := map[bool]int{false: 2, true: 1}[asJSON]
		var got []string
		read := func(changes int) {
			for range changes * perChange {
				got = append(got, out.next(t))
			}
		}
		b := take(t, s, shard.MemberKey("billing", "pod-b"), "pod-b", nil)
		read(2) // tenant/0 held, pod-b joined
		require.NoError(t, s.Release(ctxT(t), b))
		read(1) // pod-b left
		require.Equal(t, 0, <-done, "exits after --count changes")
		cancel()
		require.NoError(t, s.Release(ctxT(t), renewed))

		if !asJSON {
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  billing.shards.tenant/0  held by pod-a  token `+tokenString(l.Token), got[0])
			assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  1 member, 1 shard: balanced$`, got[1])
			assert.Regexp(t, `  billing.members.pod-b  held by pod-b  `, got[2])
			assert.Regexp(t, `  2 members, 1 shard: balanced$`, got[3])
			assert.Regexp(t, `  billing.members.pod-b  free \(was pod-b, token `+tokenString(b.Token)+`\)$`, got[4])
			assert.Regexp(t, `  1 member, 1 shard: balanced$`, got[5])
			continue
		}
		var changes []fleetChangeJSON
		for _, line := range got {
			var c fleetChangeJSON
			require.NoError(t, json.Unmarshal([]byte(line), &c), line)
			changes = append(changes, c)
		}
		assert.Equal(t, "shard", changes[0].Kind)
		assert.Equal(t, "tenant/0", changes[0].Name)
		assert.True(t, changes[0].Held)
		assert.Equal(t, uint64(l.Token), changes[0].Token)
		assert.True(t, changes[0].Balanced)
		assert.Equal(t, "member", changes[1].Kind)
		assert.Equal(t, "pod-b", changes[1].Name)
		assert.Equal(t, 2, changes[1].MemberCount)
		assert.False(t, changes[2].Held)
		assert.Equal(t, 1, changes[2].MemberCount)
	}
	require.NoError(t, s.Release(ctxT(t), a))
}

// fleetAt is a fleet member whose Status is st.
type fleetAt shard.Status

func (f fleetAt) Status() shard.Status { return shard.Status(f) }

// aster status shows each instance's fleets: its state, what it runs, and
// its view of the balance.
func TestStatusShowsFleets(t *testing.T) {
	srv := natstest.Start(t)
	now := time.Now()
	reg := monitor.New(monitor.Config{Instance: "pod-a"})
	reg.AddFleet(fleetAt(shard.Status{OwnerID: "pod-a", Prefix: "billing", State: shard.StateActive,
		Since: now.Add(-time.Minute), Members: []shard.Member{{OwnerID: "pod-a"}, {OwnerID: "pod-b"}},
		Owned: 3, Target: 4, UnbalancedSince: now.Add(-2 * time.Second)}))
	instanceOf(t, srv.ClientURL(), reg)

	r := aster(t, map[string]string{"NATS_URL": srv.ClientURL()}, "status")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	assert.Regexp(t, `^pod-a\s+\S+\s+ok\s+fleet billing\s+active \(runs 3 of 4 placed here\)\s+1m\d+s ago\s+-\s+-\s+`+
		`2 members, not balanced for \d(\.\d)?s \(aster shards billing\)\s+-$`, lines[1])
}

func TestNaturalCompare(t *testing.T) {
	names := []string{"tenant/10", "tenant/2", "tenant/1", "eu/3", "tenant/02", "tenant/x", "tenant/"}
	slices.SortStableFunc(names, naturalCompare)
	assert.Equal(t, []string{"eu/3", "tenant/", "tenant/1", "tenant/2", "tenant/02", "tenant/10", "tenant/x"}, names)
}

// A membership or shard lease not renewed for its TTL counts as free in the
// verdict, as it does for the hosts: its holder is gone, although the server
// keeps the key for a grace longer.
func TestDescribeFleetTreatsUnrenewedLeasesAsFree(t *testing.T) {
	now := time.Now()
	held := func(id, owner string, written time.Time) natsstore.LeaseInfo {
		return natsstore.LeaseInfo{LeaseID: id, State: natsstore.KeyHeld, Written: written, Revision: 1,
			Holder: lease.Holder{OwnerID: owner, Term: "t-" + owner, Token: 1, TTL: 10 * time.Second}}
	}
	infos := []natsstore.LeaseInfo{
		held(shard.MemberKey("p", "alive"), "alive", now.Add(-time.Second)),
		held(shard.MemberKey("p", "dead"), "dead", now.Add(-15*time.Second)),
		held(shard.ShardKey("p", "a"), "alive", now.Add(-time.Second)),
		held(shard.ShardKey("p", "b"), "dead", now.Add(-15*time.Second)),
	}
	f := describeFleet("p", []string{"a", "b"}, infos, natsstore.ExpiryServer, now)
	assert.Equal(t, 1, f.MemberCount, "the dead member is gone")
	assert.Equal(t, 1, f.Free, "its shard is free")
	assert.False(t, f.Balanced)
	f = describeFleet("p", []string{"a", "b"}, infos, natsstore.ExpiryServer, now.Add(-10*time.Second))
	assert.Equal(t, 2, f.MemberCount, "both renewed within their TTL then")
}

// aster shards --watch counts a lease the watch has not seen written for
// its TTL as free, as the Hosts do: its holder is gone, and the server
// keeps the key a grace longer. A renewal keeps it held.
func TestShardsWatchFreesLeasesNotRenewedForTheirTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &lockedBuffer{}
		c := &cli{stdout: out, count: 1}
		h := lease.Holder{OwnerID: "pod-a", Term: "t", Token: 5, TTL: time.Second}
		member, sh := shard.MemberKey("p", "pod-a"), shard.ShardKey("p", "s/0")
		current := []lease.Event{{LeaseID: member, Kind: lease.EventHeld, Holder: h, Revision: 5},
			{LeaseID: sh, Kind: lease.EventHeld, Holder: h, Revision: 6}}
		changes := make(chan lease.Event)
		done := make(chan error, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // virtual: a regression fails, not hangs
		defer cancel()
		go func() { done <- followFleet(ctx, c, "p", []string{"s/0"}, current, changes) }()
		time.Sleep(900 * time.Millisecond)
		changes <- lease.Event{LeaseID: member, Kind: lease.EventHeld, Holder: h, Revision: 7} // renewed
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		require.Empty(t, out.String(), "both written within their TTL")
		time.Sleep(200 * time.Millisecond) // the shard: 1.4 s without a write
		synctest.Wait()
		require.NoError(t, <-done, "one change, as --count says")
		assert.Contains(t, out.String(), "p.shards.s/0  free (was pod-a, token 5)")
		assert.Contains(t, out.String(), "1 member, 1 shard: not balanced: 1 shard is free")
	})
}

// lockedBuffer is an io.Writer whose contents can be read while it is
// written.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoMembersIsNotBalanced: a fleet with no members places nothing, and
// its verdict never says balanced, whatever the shards.
func TestNoMembersIsNotBalanced(t *testing.T) {
	now := time.Now()
	for _, declared := range [][]string{nil, {"tenant/0"}} {
		f := describeFleet("nobody", declared, nil, natsstore.ExpiryServer, now)
		assert.False(t, f.Balanced, "declared %v", declared)
		assert.Zero(t, f.MemberCount)
	}
}

// TestShardsWatchAnEmptyFleet: --watch on a fleet with no lease yet says
// so on stderr, and goes on to show its first lease.
func TestShardsWatchAnEmptyFleet(t *testing.T) {
	srv := natstest.Start(t)
	s := store(t, srv.ClientURL(), natsstore.DefaultBucket)
	out, errOut := newLines(), newLines()
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"shards", "billing", "--watch", "--count", "1", "--server", srv.ClientURL()},
			func(string) string { return "" }, out, errOut)
	}()
	assert.Equal(t, `aster shards: no leases of fleet "billing" in bucket "aster_leases" (is the prefix, the bucket or `+
		`the account right?); watching for its first lease`, errOut.next(t))
	take(t, s, shard.MemberKey("billing", "pod-a"), "pod-a", nil)
	assert.Contains(t, out.next(t), "billing.members.pod-a  held by pod-a")
	assert.Equal(t, 0, <-done)
}
