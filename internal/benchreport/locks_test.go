package benchreport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockOutput is the output of the lock benchmarks on natsstore and of
// bench/etcd: the session meets its acquisition goal, the lease misses it.
const lockOutput = `pkg: github.com/asterforge/aster/lock
BenchmarkAcquireRelease/lease-2 	 1000	 200000 ns/op	 1.25 lock/raw2	 1.30 lock/raw2-p50	 160000 raw2-ns/op	 12000 outside-ns/op
BenchmarkAcquireRelease/session-2 	 1000	 170000 ns/op	 1.06 lock/raw2	 1.05 lock/raw2-p50	 160000 raw2-ns/op
BenchmarkNew-2 	 1000	 25000 ns/op	 4000 first-lock-us
BenchmarkHeldLocksNATS/locks=10000/mode=lease-2 	 1	 3e10 ns/op	 0.40 cores	 40000 cpu-ns/lock-s	 200 cpu-us/renewal	 15000 renewals	 2500 B/lock
BenchmarkHeldLocksNATS/locks=10000/mode=session-2 	 1	 3e10 ns/op	 0.004 cores	 400 cpu-ns/lock-s	 30000 cpu-us/renewal	 2 renewals	 900 B/lock
BenchmarkHeldLocksNATS/locks=100000/mode=session-2 	 1	 3e10 ns/op	 0.08 cores	 800 cpu-ns/lock-s	 30000 cpu-us/renewal	 2 renewals	 800 B/lock
BenchmarkLockHandover/candidates=3-2 	 300	 1e6 ns/op	 1.2 p50-ms	 3.1 p99-ms
BenchmarkLockHandover/candidates=100-2 	 300	 1e6 ns/op	 1.5 p50-ms	 8.0 p99-ms
pkg: github.com/asterforge/aster/bench/etcd
BenchmarkPeer/uncontended/system=aster-2 	 1	 1e8 ns/op	 0.32 p50-ms	 0.70 p99-ms
BenchmarkPeer/uncontended/system=aster-sync-2 	 1	 1e8 ns/op	 0.80 p50-ms	 2.00 p99-ms
BenchmarkPeer/uncontended/system=etcd-2 	 1	 1e8 ns/op	 1.60 p50-ms	 5.00 p99-ms
BenchmarkPeer/contended/system=aster-sync-2 	 1	 3e9 ns/op	 350 locks/s
BenchmarkPeer/contended/system=etcd-2 	 1	 3e9 ns/op	 80 locks/s
BenchmarkPeer/held-10000/system=etcd-2 	 1	 3e10 ns/op	 0.01 client-cores	 0.02 server-cores	 200 client-B/lock	 900 server-B/lock
`

func TestBuildReportsLocksAndPeers(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(lockOutput), 2))
	md := string(Build(Input{Results: rs}).Markdown)

	assert.Contains(t, goalLine(t, md, "Uncontended Acquire + Release, a lock under the session"), "| met |")
	assert.Contains(t, goalLine(t, md, "Uncontended Acquire + Release, a lock with a lease"), "**missed**")
	assert.Contains(t, md, "of the lock's mean, 12.0 µs (n=1) was spent outside the store's calls")
	assert.Contains(t, goalLine(t, md, "lock.New"), "| met |")
	row := goalLine(t, md, "10k locks held on NATS: steady CPU")
	assert.Contains(t, row, "0.01x")
	assert.Contains(t, row, "| met |")
	assert.Contains(t, goalLine(t, md, "100k locks held under a session"), "**missed**", "0.08 cores > 0.05")
	assert.Contains(t, goalLine(t, md, "Lock handover, 3 candidates"), "| met |")
	assert.Contains(t, goalLine(t, md, "Lock handover, 100 candidates in 4 Lockers, release"), "| met |")
	assert.Contains(t, goalLine(t, md, "Lock handover, 100 candidates in 4 Lockers under sessions"), "not measured")
	assert.Contains(t, md, "## Locks on NATS")

	assert.Contains(t, md, "## Beside etcd")
	assert.Contains(t, goalLine(t, md, "Uncontended Lock + Unlock"), "| 320 µs / 700 µs | 800 µs / 2.00 ms | 1.60 ms / 5.00 ms |")
	assert.Contains(t, goalLine(t, md, "Uncontended Lock + Unlock"), "| 0.50x |", "Aster sync always against etcd")
	assert.Contains(t, goalLine(t, md, "Contended"), "| 4.38x |")
	assert.Contains(t, goalLine(t, md, "10,000 locks held, TTL 30 s"), "0.0300 (0.0100 + 0.0200)")
	assert.NotContains(t, md, "Graceful handover, standby waiting 250 ms", "rows without measurements are left out")
}

// A short-lived Locker's life on NATS is a goal against etcd's short-lived
// session without fsync, and a row of the peer table.
func TestPeerLifeRow(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(`pkg: github.com/asterforge/aster/bench/etcd
BenchmarkPeer/life/system=aster-lease-2 	 1	 1e8 ns/op	 0.44 p50-ms	 2.40 p99-ms
BenchmarkPeer/life/system=aster-2 	 1	 1e8 ns/op	 6.90 p50-ms	 26.9 p99-ms
BenchmarkPeer/life/system=etcd-2 	 1	 1e8 ns/op	 5.00 p50-ms	 16.7 p99-ms
BenchmarkPeer/life/system=etcd-nosync-2 	 1	 1e8 ns/op	 1.76 p50-ms	 8.00 p99-ms
`), 2))
	md := string(Build(Input{Results: rs}).Markdown)
	row := goalLine(t, md, "A short-lived Locker's whole life on NATS")
	assert.Contains(t, row, "p50 440 µs (n=1), p99 2.40 ms")
	assert.Contains(t, row, "etcd without fsync: p50 1.76 ms (n=1), p99 8.00 ms")
	assert.Contains(t, row, "0.25x")
	assert.Contains(t, row, "| met |")
	assert.Contains(t, goalLine(t, md, "A short-lived client's whole life"), "| 6.90 ms / 26.9 ms | - | 5.00 ms / 16.7 ms | 440 µs / 2.40 ms | - | 1.76 ms / 8.00 ms |")
}

// A short-lived Locker's life is reported beside the same life with a
// shared actor system, from the same run.
func TestLockerLifeRow(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(`pkg: github.com/asterforge/aster/lock
BenchmarkLockerLife/own=true-2 	 500	 4668000 ns/op
BenchmarkLockerLife/own=false-2 	 500	 20800 ns/op
`), 2))
	row := goalLine(t, string(Build(Input{Results: rs}).Markdown), "A short-lived Locker's whole life")
	assert.Contains(t, row, "4.67 ms")
	assert.Contains(t, row, "one System given to every Locker (Config.System): 20.8 µs")
	assert.Contains(t, row, "224.42x")
}
