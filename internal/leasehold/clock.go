package leasehold

import (
	"sync/atomic"
	"time"
)

// Sent is when a request went out: the time on this process's clocks, and
// how long the machine had been suspended by then. Go's monotonic clock
// stops while the machine is suspended (CLOCK_MONOTONIC on Linux), while
// the server's TTLs and the contenders' clocks run on: a Hold adds the
// suspension since its last write's Sent to every check of its validity,
// so that a machine that wakes past it finds its token expired.
type Sent struct {
	At        time.Time
	suspended time.Duration // at At or earlier: never more than at At
}

// Now returns the Sent of a request about to go out.
func Now() Sent {
	now := time.Now()
	r := offset.Load()
	if r == nil || skewed(r.at, now) {
		r = readOffset()
		now = r.at
	}
	return Sent{At: now, suspended: r.suspended}
}

// since returns how long the machine was suspended between s and now: 0
// below suspendNoise.
//
// Reading the clock that counts suspended time is a system call (over a
// microsecond here, against 50 ns for time.Now), too much for every Token.
// It is read only when the wall clock and the monotonic clock, which
// time.Now reads together, drifted apart since s: the kernel moves the wall
// clock on by a suspension as it does the boot clock, and otherwise only a
// step of the wall clock (settimeofday, an NTP step) moves them apart.
// A step then costs one system call per check until the next write, and
// is never counted as a suspension. The one suspension missed is one
// that a backward step of the wall clock, within the same interval,
// cancels to within suspendNoise.
func (s Sent) since(now time.Time) time.Duration {
	if !skewed(s.At, now) {
		return 0
	}
	if d := readOffset().suspended - s.suspended; d >= suspendNoise {
		return d
	}
	return 0
}

// suspendNoise is the least suspension that counts: the clocks are read one
// after the other, so readings differ by microseconds without any
// suspension. What is less than this is well within any safety margin.
const suspendNoise = time.Millisecond

// skewed reports whether the wall clock and the monotonic clock moved apart
// by suspendNoise or more from a to b, in either direction. The readings
// of a testing/synctest bubble carry no monotonic clock, so never skew.
var skewed = func(a, b time.Time) bool {
	d := b.Round(0).Sub(a.Round(0)) - b.Sub(a)
	return d >= suspendNoise || d <= -suspendNoise
}

// offsetReading is a reading of suspendedClock, with the time.Now taken
// right after it.
type offsetReading struct {
	at        time.Time
	suspended time.Duration
}

// offset is the last reading, shared by the process: the suspension only
// changes when the clocks are skewed.
var offset atomic.Pointer[offsetReading]

// readOffset reads suspendedClock, then time.Now (so that the reading is
// never later than at), and keeps it as the process's last reading.
func readOffset() *offsetReading {
	s := suspendedClock()
	r := &offsetReading{at: time.Now(), suspended: s}
	offset.Store(r)
	return r
}

// suspendedClock returns how long the machine has been suspended since some
// fixed moment (up to the microseconds between its clock reads): on Linux
// CLOCK_BOOTTIME minus CLOCK_MONOTONIC; elsewhere 0 (Go's monotonic clock
// decides). Tests replace it.
var suspendedClock = machineSuspended
