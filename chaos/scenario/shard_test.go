package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/shard"
)

// Sharded workers (package shard): each holder process is a member of one
// fleet (chaos-holder -mode shard), a shard.Host whose workload writes
// through the fence every 10 ms under each shard's lease ID, so that every
// shard is checked as a lease (overlap, token order, stale writes
// admitted, linearizability). After each fault the scenario waits for full
// placement: every shard written within the last fresh interval by a live
// member, and every live member holding its share (S/N or S/N+1).
const (
	fleetShards  = 8
	fleetMembers = 3
	// fresh is how recent a shard's last accepted write must be for the
	// shard to count as running (its workload writes every 10 ms).
	fresh = 100 * time.Millisecond
)

// shardKeys are the lease IDs of the fleet's shards.
func (e *env) shardKeys() []string {
	var keys []string
	for _, s := range shard.Range("s", fleetShards) {
		keys = append(keys, shard.ShardKey(e.lease, s))
	}
	return keys
}

// live returns the holders whose processes run, in name order.
func (e *env) live() []*holder {
	e.mu.Lock()
	defer e.mu.Unlock()
	var hs []*holder
	for _, h := range e.holders {
		if !h.proc.Exited() {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b *holder) int { return e.seqOf(a) - e.seqOf(b) })
	return hs
}

func (e *env) seqOf(h *holder) int {
	var n int
	fmt.Sscanf(h.name, "h%d", &n)
	return n
}

// placed waits until every shard runs and every live member holds its
// share, and returns the time from since (a reference time) to then.
func (e *env) placed(since int64) time.Duration {
	e.t.Helper()
	keys := e.shardKeys()
	deadline := time.Now().Add(limit)
	for {
		now := record.Now()
		if e.fullPlacement(keys, now) {
			return time.Duration(now - since)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: the shards were not all placed within %v (%s)", e.name, limit, e.placement(keys, now))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fullPlacement reports whether, at now, every shard of keys was written
// within fresh by a live member and the live members hold balanced shares.
func (e *env) fullPlacement(keys []string, now int64) bool {
	live := e.live()
	if len(live) == 0 {
		return false
	}
	count := map[string]int{}
	for _, k := range keys {
		w, ok := e.fence.Last(k)
		if !ok || now-w.At > int64(fresh) {
			return false
		}
		count[w.Proc]++
	}
	lo := len(keys) / len(live)
	for _, h := range live {
		if c := count[h.name]; c < lo || c > lo+1 {
			return false
		}
		delete(count, h.name)
	}
	return len(count) == 0
}

// placement describes who wrote each shard last, for a failure message.
func (e *env) placement(keys []string, now int64) string {
	s := ""
	for _, k := range keys {
		if w, ok := e.fence.Last(k); ok {
			s += fmt.Sprintf("%s: %s %.0f ms ago; ", k, w.Proc, float64(now-w.At)/1e6)
		} else {
			s += k + ": never; "
		}
	}
	return s
}

// startFleet starts the fleet's first members and waits for full
// placement.
func (e *env) startFleet() {
	e.extra = []string{"-mode", "shard", "-shards", fmt.Sprint(fleetShards)}
	// Count the shards' handovers: a membership lease is one member's,
	// taken again by the member itself after a fault (checked all the
	// same).
	e.counts = func(ho check.Handover) bool { return strings.HasPrefix(ho.Lease, e.lease+".shards.") }
	e.startN(fleetMembers)
	e.placed(record.Now())
}

// finishFleet checks the fleet's records and adds its row, with the times
// to full placement after the faults.
func (e *env) finishFleet(desc string, runs int, toPlaced []time.Duration, notes string, causes ...string) {
	e.t.Helper()
	s := check.Summarize(toPlaced)
	note := fmt.Sprintf("%d shards, %d members; full placement %.0f ms after the last fault (p50), %.0f ms at most",
		fleetShards, fleetMembers, msf(s.P50), msf(s.Max))
	if notes != "" {
		note += "; " + notes
	}
	e.finish(desc, runs, note, causes...)
	e.t.Logf("%s: full placement after each fault: %v", e.name, toPlaced)
}

// TestShardKillDuringRebalance: a member joins the fleet and, while shards
// move to it, another member is killed.
func TestShardKillDuringRebalance(t *testing.T) {
	e := newEnv(t, "shard-kill-rebalance")
	e.direct = true
	n := rounds(2, 10)
	e.startFleet()
	var toPlaced []time.Duration
	var after []time.Duration
	mid := 0
	for i := range n {
		old := e.live()
		joined := record.Now()
		j := e.start()
		// Strike as soon as a shard moves to the newcomer: the moves are
		// under way. Every other round the member it moves from is the
		// one killed.
		from := e.moving(j, joined)
		victim := old[rand.IntN(len(old))]
		if i%2 == 0 {
			if k := slices.IndexFunc(old, func(h *holder) bool { return h.name == from }); k >= 0 {
				victim = old[k]
			}
		}
		now := record.Now()
		after = append(after, time.Duration(now-joined))
		if !e.fullPlacement(e.shardKeys(), now) {
			mid++ // the newcomer does not hold its share yet
		}
		e.kill(victim, "during a rebalance")
		toPlaced = append(toPlaced, e.placed(record.Now()))
	}
	s := check.Summarize(after)
	e.finishFleet("sharded fleet (shard.Host, 8 shards): a member joins, and another is killed while shards move to it",
		n, toPlaced, fmt.Sprintf("killed %.0f ms (p50) after the newcomer's start, as soon as a "+
			"shard moved (every other round, the member it moved from); %d of %d kills before the newcomer held "+
			"its share", msf(s.P50), mid, n),
		string(record.MarkKill))
}

// moving waits until a shard moves after since: one of them is not written
// any more by its holder (its workload stopped to hand it over), or the
// newcomer j writes one. It returns the last writer of that shard.
func (e *env) moving(j *holder, since int64) string {
	e.t.Helper()
	keys := e.shardKeys()
	deadline := time.Now().Add(limit)
	for {
		now := record.Now()
		for _, k := range keys {
			w, ok := e.fence.Last(k)
			if ok && w.At > since && (w.Proc == j.name || now-w.At > int64(15*time.Millisecond)) {
				return w.Proc
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no shard moved within %v", e.name, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestShardPause: a member stopped (SIGSTOP) past the TTL, then continued.
func TestShardPause(t *testing.T) {
	fullOnly(t)
	e := newEnv(t, "shard-pause-3x-ttl")
	e.direct = true
	n := rounds(2, 6)
	e.startFleet()
	var toPlaced []time.Duration
	for range n {
		live := e.live()
		h := live[rand.IntN(len(live))]
		time.Sleep(jitter(renew))
		e.pause(h, 3*ttl)
		toPlaced = append(toPlaced, e.placed(record.Now()))
	}
	e.finishFleet("sharded fleet (shard.Host, 8 shards): SIGSTOP of a member for 3 s, then SIGCONT",
		n, toPlaced, "", string(record.MarkStop))
}

// TestShardPartition: a member cut off from NATS (its proxy blackholed)
// past the TTL, then healed.
func TestShardPartition(t *testing.T) {
	fullOnly(t)
	e := newEnv(t, "shard-partition-3x-ttl")
	n := rounds(2, 6)
	e.startFleet()
	var toPlaced []time.Duration
	for range n {
		live := e.live()
		h := live[rand.IntN(len(live))]
		time.Sleep(jitter(renew))
		e.netFault(h, "partition", 3*ttl, (*harness.Proxy).Blackhole)
		toPlaced = append(toPlaced, e.placed(record.Now()))
	}
	e.finishFleet("sharded fleet (shard.Host, 8 shards): a member's traffic to NATS silently dropped for 3 s, "+
		"then healed", n, toPlaced, "", string(record.MarkNetFault))
}
