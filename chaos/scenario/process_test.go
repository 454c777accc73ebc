package scenario

import (
	"fmt"
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
)

// candidates is the number of holder processes in the fault scenarios.
const candidates = 3

// crashLoop runs rounds of: wait for a new leader, strike it with hit, and
// replace it when hit killed it. It returns the notes of hit.
func crashLoop(e *env, n int, hit func(h *holder) string) []string {
	e.startN(candidates)
	var token uint64
	var notes []string
	for range n {
		var h *holder
		h, token = e.leader(token)
		if note := hit(h); note != "" {
			notes = append(notes, note)
		}
		if h.proc.Exited() {
			e.start()
		}
	}
	e.leader(token) // the last takeover
	return notes
}

func TestKillIdle(t *testing.T) {
	e := newEnv(t, "kill-idle")
	n := rounds(3, 40)
	crashLoop(e, n, func(h *holder) string {
		time.Sleep(jitter(renew))
		e.kill(h, "idle")
		return ""
	})
	e.finish("SIGKILL of the leader at a random moment", n, "", string(record.MarkKill))
}

func TestLockKillIdle(t *testing.T) {
	e := newEnv(t, "lock-kill-idle")
	e.extra = []string{"-mode", "lock"}
	n := rounds(2, 30)
	crashLoop(e, n, func(h *holder) string {
		time.Sleep(jitter(renew))
		e.kill(h, "idle")
		return ""
	})
	e.finish("lock.Locker holders: SIGKILL of the guard's process at a random moment", n, "", string(record.MarkKill))
}

func TestLockPause(t *testing.T) {
	fullOnly(t)
	e := newEnv(t, "lock-pause-3x-ttl")
	e.extra = []string{"-mode", "lock"}
	n := rounds(2, 12)
	e.startN(candidates)
	for range n {
		h, _ := e.current()
		time.Sleep(jitter(renew))
		e.pause(h, 3*ttl)
		time.Sleep(ttl)
	}
	e.current()
	e.finish("lock.Locker holders: SIGSTOP of the guard's process for 3 s, then SIGCONT", n, "", string(record.MarkStop))
}

// TestLockSession runs lock.Locker holders that hold the lock under a
// session (lock.Config.Session): the lock's key is written once, naming
// the session, and is valid while the session is. Rounds alternate a
// SIGKILL of the guard's process and a SIGSTOP of it for 3 TTL.
func TestLockSession(t *testing.T) {
	e := newEnv(t, "lock-session")
	e.extra = []string{"-mode", "lock", "-session"}
	n := rounds(2, 30)
	e.startN(candidates)
	var token uint64
	kills, pauses := 0, 0
	for i := range n {
		var h *holder
		h, token = e.leader(token)
		time.Sleep(jitter(renew))
		if i%2 == 0 {
			kills++
			e.kill(h, "idle")
			e.start()
			continue
		}
		pauses++
		e.pause(h, 3*ttl)
		time.Sleep(ttl)
	}
	e.leader(token)
	e.finish("lock.Locker holders under a session (lock.Config.Session): SIGKILL of the guard's process, "+
		"or SIGSTOP of it for 3 s, in turn", n, fmt.Sprintf("%d kills, %d pauses", kills, pauses),
		string(record.MarkKill), string(record.MarkStop))
}

func TestKillMidRenewal(t *testing.T) {
	e := newEnv(t, "kill-mid-renewal")
	n := rounds(3, 30)
	hits := 0
	crashLoop(e, n, func(h *holder) string {
		// Slow the leader's link so that a renewal spends tens of
		// milliseconds in flight, then strike while one is.
		require.NoError(t, h.proxy.Delay(15*time.Millisecond))
		tail := record.NewTail(h.log)
		deadline := time.Now().Add(3 * renew)
		for time.Now().Before(deadline) {
			ops, err := tail.InFlight()
			require.NoError(t, err)
			if inFlight(ops, record.OpRenew) {
				hits++
				e.kill(h, "mid-renewal")
				return ""
			}
			time.Sleep(time.Millisecond)
		}
		e.kill(h, "no renewal seen in flight")
		return ""
	})
	e.finish("SIGKILL of the leader while a renewal is in flight (leader's link delayed 15 ms each way)", n,
		fmt.Sprintf("%d of %d kills struck with a renewal in flight", hits, n), string(record.MarkKill))
}

func inFlight(ops []record.Op, typ record.OpType) bool {
	for _, op := range ops {
		if op.Type == typ {
			return true
		}
	}
	return false
}

func testPause(t *testing.T, factor float64, short bool) {
	if !short {
		fullOnly(t)
	}
	name := fmt.Sprintf("pause-%gx-ttl", factor)
	e := newEnv(t, name)
	n := rounds(2, 12)
	e.startN(candidates)
	d := time.Duration(factor * float64(ttl))
	for range n {
		h, _ := e.current()
		time.Sleep(jitter(renew))
		e.pause(h, d)
		time.Sleep(ttl) // let the paused leader find out and the others settle
	}
	e.current()
	e.finish(fmt.Sprintf("SIGSTOP of the leader for %v, then SIGCONT", d), n, "", string(record.MarkStop))
}

func TestPauseHalfTTL(t *testing.T)  { testPause(t, 0.5, false) }
func TestPauseOneTTL(t *testing.T)   { testPause(t, 1, false) }
func TestPauseThreeTTL(t *testing.T) { testPause(t, 3, true) }

func TestServerKill(t *testing.T) {
	e := newEnv(t, "server-kill")
	n := rounds(2, 10)
	e.startN(candidates)
	for range n {
		e.current()
		time.Sleep(jitter(renew))
		e.mark(record.MarkServerKill, "", "")
		require.NoError(t, e.nats.Kill())
		time.Sleep(jitter(ttl))
		require.NoError(t, e.nats.Start())
		e.mark(record.MarkServerStart, "", "")
	}
	e.current()
	e.finish("SIGKILL of nats-server, restarted on the same port and store after up to 1 TTL", n, "",
		string(record.MarkServerKill))
}

func testNet(t *testing.T, name, desc string, short bool, d time.Duration, fault func(*harness.Proxy) error) {
	if !short {
		fullOnly(t)
	}
	e := newEnv(t, name)
	n := rounds(2, 10)
	e.startN(candidates)
	for range n {
		h, _ := e.current()
		e.netFault(h, name, d, fault)
		time.Sleep(ttl)
	}
	e.current()
	e.finish(desc, n, "", string(record.MarkNetFault))
}

func TestNetBlackhole(t *testing.T) {
	testNet(t, "net-blackhole", "the leader's traffic silently dropped both ways for 2 TTL", true, 2*ttl,
		(*harness.Proxy).Blackhole)
}

func TestNetDrop(t *testing.T) {
	testNet(t, "net-drop", "the leader's connections reset and refused for 2 TTL", false, 2*ttl,
		(*harness.Proxy).Drop)
}

func TestNetLostResponses(t *testing.T) {
	testNet(t, "net-lost-responses", "the leader's requests applied, every response lost, for 2 TTL", true, 2*ttl,
		(*harness.Proxy).LoseResponses)
}

func TestNetDelayShort(t *testing.T) {
	testNet(t, "net-delay-100ms", "100 ms added each way to the leader's traffic for 2 TTL", false, 2*ttl,
		func(p *harness.Proxy) error { return p.Delay(100 * time.Millisecond) })
}

func TestNetDelayLong(t *testing.T) {
	testNet(t, "net-delay-1500ms", "1.5 s added each way (past the 800 ms renew deadline) for 3 TTL", false, 3*ttl,
		func(p *harness.Proxy) error { return p.Delay(1500 * time.Millisecond) })
}

func testTamper(t *testing.T, typ record.OpType, short bool) {
	if !short {
		fullOnly(t)
	}
	name := "tamper-" + string(typ)
	e := newEnv(t, name)
	n := rounds(2, 10)
	e.startN(candidates)
	for range n {
		e.current()
		time.Sleep(jitter(renew))
		e.tamper(typ)
		time.Sleep(2 * ttl)
		if typ == record.OpGarbage {
			e.tamper(record.OpDelete) // only an operator can clear a value no holder understands
		}
	}
	e.current()
	desc := map[record.OpType]string{
		record.OpDelete:  "the lease key deleted by hand",
		record.OpPurge:   "the lease key purged by hand",
		record.OpGarbage: "garbage written to the lease key, deleted by hand 2 TTL later",
	}[typ]
	e.finish(desc, n, "", string(record.MarkTamper))
}

func TestTamperDelete(t *testing.T)  { testTamper(t, record.OpDelete, false) }
func TestTamperPurge(t *testing.T)   { testTamper(t, record.OpPurge, false) }
func TestTamperGarbage(t *testing.T) { testTamper(t, record.OpGarbage, true) }

// testCycles runs processes of candidates whose workloads return after
// hold, which releases the lease: graceful handovers, as fast as they go.
func testCycles(t *testing.T, name, desc string, procs, each int, d time.Duration, extra ...string) {
	e := newEnv(t, name)
	e.direct = true
	e.extra = extra
	e.startN(procs, "-candidates", fmt.Sprint(each), "-hold", "20ms")
	time.Sleep(d)
	e.finish(desc, 1, fmt.Sprintf("%d processes x %d candidates for %v", procs, each, d), "release")
}

// A leader that steps down holds off for a jittered StandbyRetryInterval
// (here 100 ms), or until another term has taken the lease, so that
// another takes over: with terms of 20 ms, every handover measures the
// release and the watch, not a hold-off.
func TestGraceful(t *testing.T) {
	testCycles(t, "graceful", "3 holders of 3 candidates; each leader releases after 20 ms of work", 3, 3,
		time.Duration(rounds(3, 60))*time.Second, "-standby", "100ms")
}

func TestLockGraceful(t *testing.T) {
	testCycles(t, "lock-graceful", "3 lock.Locker holders; each releases its guard after 20 ms of work", 3, 1,
		time.Duration(rounds(2, 60))*time.Second, "-mode", "lock")
}

func TestHerd(t *testing.T) {
	fullOnly(t)
	testCycles(t, "herd-100", "100 candidates in 4 processes; each leader releases after 20 ms", 4, 25, 15*time.Second)
}
