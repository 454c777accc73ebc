package scenario

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/record"
)

// The scenarios of "one tenure, one identity": every term has an identity
// of its own, and one candidate never runs two terms at once, whatever its
// owner ID, its parent or its workload does.

// sharedOwner is the owner ID every holder of the duplicate-owner scenarios
// is configured with: one pod name on every process.
const sharedOwner = "pod-7"

// resign asks h's supervisors to step down (SIGUSR1: LeaseSupervisor.Resign).
func (e *env) resign(h *holder) {
	e.mark(record.MarkResign, h.name, "")
	require.NoError(e.t, h.proc.Signal(syscall.SIGUSR1))
}

// restart makes h's supervision tree restart its lease supervisor (SIGUSR2).
func (e *env) restart(h *holder) {
	e.mark(record.MarkRestart, h.name, "")
	require.NoError(e.t, h.proc.Signal(syscall.SIGUSR2))
}

// Three processes configured with one owner ID, their leaders killed or
// resigning in turn. Before terms had identities of their own, the second
// process's acquire took the first one's key for its own and both led.
func TestDuplicateOwnerKill(t *testing.T) {
	e := newEnv(t, "dup-owner-kill")
	e.extra = []string{"-owner", sharedOwner}
	n := rounds(4, 30)
	var token uint64
	e.startN(candidates)
	for i := range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(jitter(renew))
		if i%2 == 0 {
			e.kill(h, "idle")
			e.start()
		} else {
			e.resign(h)
		}
	}
	e.leader(token)
	e.finish("3 processes configured with one owner ID: the leader killed, or resigning, in turn", n, "",
		string(record.MarkKill), "release")
}

// Nine candidates in three processes, all with one owner ID, handing the
// lease over every 20 ms.
func TestDuplicateOwnerGraceful(t *testing.T) {
	testCycles(t, "dup-owner-graceful", "3 holders of 3 candidates, all with one owner ID; each leader releases after 20 ms",
		3, 3, time.Duration(rounds(2, 100))*time.Second, "-standby", "100ms", "-owner", sharedOwner)
}

// stubborn is how long the workloads of the stuck-workload scenarios ignore
// their cancellation: well past the TTL, so that the lease expires under
// them and another candidate may take over while they run.
const stubborn = 2500 * time.Millisecond

// Each process runs its LeaseSupervisor under a supervision tree that
// restarts it on a signal, with a workload that ignores its cancellation
// for 2.5 s and then makes one unchecked write with its old tenure. The
// leader's supervisor is restarted: its lease expires under the stuck
// workload and another process takes over; the restarted supervisor must
// not start a term until its workload has stopped, and the late write must
// be refused by the fence.
func TestStuckWorkloadRestart(t *testing.T) {
	e := newEnv(t, "stuck-restart")
	e.extra = []string{"-mode", "restart", "-stubborn", stubborn.String(), "-late-write"}
	n := rounds(1, 10)
	e.startN(candidates)
	var token uint64
	for range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(stubborn) // every earlier stuck workload has stopped
		e.restart(h)
	}
	e.leader(token)
	time.Sleep(stubborn)
	e.finish("restart mode: the leader's supervisor restarted by its parent while its workload ignores "+
		"cancellation for 2.5 s, then writes once more with its old tenure", n, "", string(record.MarkRestart))
}

// The same with one process: nobody else can take over, so the restarted
// supervisor is the next to lead, once its stuck workload has stopped.
// (Without the late write: with no other writer, the fence would admit it.)
func TestStuckWorkloadRestartAlone(t *testing.T) {
	e := newEnv(t, "stuck-restart-alone")
	e.extra = []string{"-mode", "restart", "-stubborn", stubborn.String()}
	n := rounds(1, 8)
	h := e.start()
	var token uint64
	for range n {
		_, token = e.leader(token)
		time.Sleep(2*renew + jitter(renew))
		e.restart(h)
	}
	e.leader(token)
	e.finish("restart mode, one process: its supervisor restarted while its workload ignores cancellation for "+
		"2.5 s; it leads again only once the workload has stopped", n, "", string(record.MarkRestart))
}

// Tree mode: the workload is a supervision tree whose writing child
// ignores its cancellation for 2.5 s (its Shutdown is 50 ms, after which
// the tree abandons it) and then writes once more with its old tenure. The
// leader is killed, or resigns (its term then stays stuck and its lease
// expires), in turn.
func TestStubbornTreeChild(t *testing.T) {
	e := newEnv(t, "stubborn-tree")
	e.extra = []string{"-mode", "tree", "-stubborn", stubborn.String(), "-shutdown", "50ms", "-late-write"}
	n := rounds(2, 16)
	e.startN(candidates)
	var token uint64
	kills := 0
	for i := range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(jitter(renew))
		if i%2 == 0 {
			e.kill(h, "idle")
			e.start()
			kills++
		} else {
			e.resign(h)
		}
	}
	e.leader(token)
	time.Sleep(stubborn)
	e.finish("tree mode: a tree child ignoring cancellation for 2.5 s (Shutdown 50 ms); the leader killed or "+
		"resigning in turn", n, fmt.Sprintf("%d kills, %d resignations", kills, n-kills),
		string(record.MarkKill), string(record.MarkResign))
}
